"""Fuzz of the set store against tampering: an installed set whose files are replaced,
truncated, removed, garbled, or swapped for a FIFO, a link, a folder or a file where its folder
was. Whatever was done, listing, checking and opening the store either work or raise a typed
``set_*`` error on one line, nothing blocks, and installing the set again repairs it. The
default run takes a few hundred cases; ``make fuzz`` takes WAI_FUZZ_EXAMPLES."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wai_dispatch.codec.sets import (
    MANIFEST_NAME,
    LoadedSet,
    SetError,
    SetStore,
    install_bundled,
    write_manifest,
)

FILES = {
    "wai-usage.json": b'{"licence": "CC0-1.0"}',
    "decoder.onnx": bytes(range(256)) * 3,
    "tables/cdfs.json": b'{"cdfs": [[0, 65536]]}',
}
NAMES = [*FILES, MANIFEST_NAME]
DEFAULT_EXAMPLES = 200
LONG_EXAMPLES = int(os.environ.get("WAI_FUZZ_EXAMPLES", "100000"))

TAMPER = st.tuples(
    st.sampled_from(
        [
            "bytes",
            "truncate",
            "append",
            "remove",
            "fifo",
            "link",
            "dangling-link",
            "folder",
            "extra",
            "folder-is-a-file",
        ]
    ),
    st.sampled_from(NAMES),
    st.binary(max_size=64),
)


@contextlib.contextmanager
def no_hang(seconds: int = 20) -> Iterator[None]:
    def fire(signum: int, frame: object) -> None:
        raise TimeoutError(f"blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _source(root: Path) -> Path:
    src = root / "bundled" / "demo"
    for name, data in FILES.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    write_manifest(src, name="demo", capability="wai.neural.bmshj2018", version="1", facts={})
    return src


def _tamper(folder: Path, kind: str, name: str, data: bytes) -> None:
    target = folder / name
    if kind == "folder-is-a-file":
        shutil.rmtree(folder)
        folder.write_bytes(data)
        return
    if kind == "extra":
        (folder / f"extra-{len(data)}.bin").write_bytes(data)
        return
    if not os.path.lexists(target):
        return  # already gone (an earlier step), or inside a folder that is now a file
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    else:
        target.unlink()
    if kind == "bytes":
        target.write_bytes(data)
    elif kind == "truncate":
        target.write_bytes(data[:1])
    elif kind == "append":
        target.write_bytes(FILES.get(name, b"{}") + data)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "link":
        target.symlink_to("/dev/zero")
    elif kind == "dangling-link":
        target.symlink_to(folder / "nowhere")
    elif kind == "folder":
        target.mkdir()


def _typed(exc: BaseException) -> None:
    assert isinstance(exc, SetError), f"{type(exc).__name__}: {exc}"
    assert exc.code.startswith("set_") and "\n" not in exc.message


def _check(steps: list[tuple[str, str, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as tmp, no_hang():
        root = Path(tmp)
        source = _source(root)
        store = SetStore(root / "sets")
        digest = store.install(source).digest
        folder = store.root / digest
        for kind, name, data in steps:
            if folder.is_dir():
                _tamper(folder, kind, name, data)
        listed = {s.digest for s in store.list()}
        damaged = store.damaged()
        assert listed.isdisjoint(damaged) and listed | set(damaged) <= {digest}
        try:
            verification = store.verify(digest)
        except SetError as exc:
            _typed(exc)
            verification = None
        try:
            opened: LoadedSet | None = store.open(digest)
        except SetError as exc:
            _typed(exc)
            opened = None
        if opened is not None:  # it opened: every byte is the manifest's
            assert {n: opened.read(n) for n in FILES} == FILES
            assert verification is None or all(
                p.code == "set_file_unexpected" for p in verification.problems
            )
        # The cheap repair the bundled sets get never raises; a full install repairs.
        result = install_bundled(store, source.parent)
        for problem in result.problems.values():
            assert problem.code.startswith("set_")
        assert store.install(source).digest == digest
        assert store.verify(digest).ok
        assert {n: store.open(digest).read(n) for n in FILES} == FILES
        assert not [p for p in store.root.iterdir() if p.name.startswith(".install-")]


STEPS = st.lists(TAMPER, min_size=1, max_size=3)


@settings(
    max_examples=DEFAULT_EXAMPLES,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(STEPS)
@pytest.mark.slow
def test_a_tampered_store_is_reported_and_repaired(steps: list[tuple[str, str, bytes]]) -> None:
    _check(steps)


@pytest.mark.fuzz
@settings(
    max_examples=LONG_EXAMPLES,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=list(HealthCheck),
    database=None,
)
@given(STEPS)
def test_store_fuzz_long(steps: list[tuple[str, str, bytes]]) -> None:
    _check(steps)
