"""The hyperprior set writer (tools/wai_bmshj2018_hyperprior_set.py) and its corpus writer: they
reproduce the bundled ``bmshj2018-hyperprior-demo-q3`` set and the corpus byte for byte (the
written things are pure functions of their inputs), and the hyper-synthesis program holds the
bound rule."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.tools

try:
    import torch  # noqa: F401

    from wai_dispatch.tools._compressai import import_compressai

    import_compressai()
except Exception as exc:  # ImportError, or a broken torch build
    pytest.skip(f"torch and CompressAI are not importable: {exc}", allow_module_level=True)

from wai_dispatch.conformance import sets_dir  # noqa: E402
from wai_dispatch.tools import hyperprior_conformance  # noqa: E402
from wai_dispatch.tools import wai_bmshj2018_hyperprior_set as writer  # noqa: E402

BUNDLED = sets_dir() / "bmshj2018-hyperprior-demo-q3"


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


@pytest.mark.slow
def test_writer_reproduces_the_bundled_set_and_the_corpus(tmp_path: Path) -> None:
    out = writer.write_set(tmp_path / "set")
    got, want = _files(out), _files(BUNDLED)
    assert sorted(got) == sorted(want)
    differ = [name for name in want if got[name] != want[name]]
    assert differ == [], f"files differ from the bundled set: {differ}"
    corpus = hyperprior_conformance.write_corpus(tmp_path / "corpus", out, log=lambda _m: None)
    bundled = _files(hyperprior_conformance.corpus_dir())
    bundled.pop("README.md")
    assert _files(tmp_path / "corpus") == bundled
    assert len(corpus["payloads"]) >= 4
