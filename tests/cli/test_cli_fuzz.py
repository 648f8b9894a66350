"""Fuzzing the CLI's file handling: ``decode`` and ``import-compressai`` with generated inputs
(random and mutated envelopes, folders, pipes, devices, links, missing files) and every kind of
output path (new, missing folder, a folder, a file in the way, a device, the input itself, a
link or a hard link to it). Whatever is drawn: exit 0, 1 or 2; an error is one line
``wai-dispatch: error: CODE: message`` with a registered code; the input is never changed; a
failed write leaves the output as it was and no temporary file behind.

The default suite runs a bounded number of cases (derandomized when ``CI`` is set); the ``fuzz``
marker runs ``WAI_FUZZ_EXAMPLES`` (default 100,000) in the dedicated run (`make fuzz`).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wai_dispatch.cli.main import main
from wai_dispatch.codec.compressai_rans import dump_compressed
from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.tools.error_registry import is_registered as is_code

BOUNDED = settings(
    max_examples=200,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LONG = settings(
    max_examples=int(os.environ.get("WAI_FUZZ_EXAMPLES", "100000")),
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=list(HealthCheck),
    database=None,
)

SAMPLES = [
    (envelopes_dir() / name).read_bytes()
    for name in ("bmshj2018-demo-q3.json", "bmshj2018-demo-q3.cbor")
]
ERROR = re.compile(r"wai-dispatch: error: ([a-z0-9_]+): \S")

INPUT_KINDS = ["bytes", "folder", "fifo", "dev-zero", "dev-null", "missing", "dangling-link"]
INPUT_KINDS += ["link-to-folder", "link-to-fifo"]
OUTPUT_KINDS = ["none", "new", "existing", "missing-folder", "a-folder", "file-in-the-way"]
OUTPUT_KINDS += ["dev-null", "the-input", "link-to-input", "hard-link-to-input", "dotted-input"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store for every case: the bundled set installed once."""
    data = tmp_path_factory.mktemp("data")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["sets", "list", "--data-dir", str(data)]) == 0
    return data


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete" and data:
            del data[pos : pos + draw(st.integers(1, 8))]
        elif op == "truncate":
            del data[pos:]
    return bytes(data)


def make_input(where: Path, kind: str, content: bytes) -> Path:
    path = where / "input"
    if kind == "bytes":
        path.write_bytes(content)
    elif kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind in ("dev-zero", "dev-null"):
        return Path("/dev/zero" if kind == "dev-zero" else "/dev/null")
    elif kind == "dangling-link":
        path.symlink_to(where / "nothing-here")
    elif kind == "link-to-folder":
        path.symlink_to(where)
    elif kind == "link-to-fifo":
        os.mkfifo(where / "fifo")
        path.symlink_to(where / "fifo")
    return path  # "missing": never made


def make_output(where: Path, kind: str, source: Path) -> Path | None:
    if kind == "none":
        return None
    out = where / "out" / "result"
    (where / "out").mkdir()
    if kind == "existing":
        out.write_bytes(b"old")
    elif kind == "missing-folder":
        return where / "nowhere" / "result"
    elif kind == "a-folder":
        out.mkdir()
    elif kind == "file-in-the-way":
        (where / "out" / "blocker").write_bytes(b"x")
        return where / "out" / "blocker" / "result"
    elif kind == "dev-null":
        return Path("/dev/null")
    elif kind == "the-input":
        return source
    elif kind == "link-to-input":
        out.symlink_to(source)
    elif kind == "hard-link-to-input":
        if source.is_file() and not source.is_symlink() and source.parent == where:
            os.link(source, out)
        else:
            out.write_bytes(b"old")
    elif kind == "dotted-input":
        return source.parent / "." / source.name
    return out


def snapshot(path: Path | None) -> bytes | str | None:
    if path is None or not os.path.lexists(path):
        return None
    if path.is_file() and str(path).startswith(tempfile.gettempdir()):
        return path.read_bytes()
    return "not a file"


class Hung(Exception):
    """Not an OSError (TimeoutError is one, and the CLI turns those into io_failed)."""


@contextlib.contextmanager
def no_hang(seconds: int, argv: list[str]) -> Iterator[None]:
    """A command that blocks (a pipe opened for reading waits for a writer) fails the case
    instead of hanging the suite: SIGALRM interrupts the blocked call."""

    def hung(*_: object) -> None:
        raise Hung(f"{argv} blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check_run(argv: list[str], where: Path, touched: list[Path | None]) -> None:
    before = [snapshot(p) for p in touched]
    err = io.StringIO()
    with (
        contextlib.redirect_stderr(err),
        contextlib.redirect_stdout(io.StringIO()),
        no_hang(20, argv),
    ):
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse only
            status = int(exc.code or 0)
    text = err.getvalue()
    assert status in (0, 1, 2), (status, text)
    assert "Traceback" not in text
    if status == 2:
        lines = text.strip().splitlines()
        assert len(lines) == 1, text
        match = ERROR.match(lines[0])
        assert match and is_code(match.group(1)), text
    source = touched[0]
    assert snapshot(source) == before[0], "the input changed"
    if status != 0:
        for path, old in zip(touched[1:], before[1:], strict=True):
            assert snapshot(path) == old, f"{path} changed by a failed command"
    leftovers = [p for p in where.rglob(".*.tmp")]
    assert leftovers == [], leftovers


def run_decode(data_dir: Path, kind: str, content: bytes, out_kind: str) -> None:
    with tempfile.TemporaryDirectory(prefix="wai-fuzz-") as tmp:
        where = Path(tmp)
        source = make_input(where, kind, content)
        out = make_output(where, out_kind, source)
        argv = ["decode", str(source), "--data-dir", str(data_dir)]
        if out is not None:
            argv += ["-o", str(out)]
        check_run(argv, where, [source, out])


COMPRESSED = dump_compressed([[b"\0" * 8]], (1, 1), model="bmshj2018-factorized", quality=3)


def run_import(data_dir: Path, kind: str, content: bytes, out_kind: str) -> None:
    with tempfile.TemporaryDirectory(prefix="wai-fuzz-") as tmp:
        where = Path(tmp)
        source = make_input(where, kind, content)
        out = make_output(where, out_kind, source)
        target = out if out is not None else where / "default.json"
        argv = ["import-compressai", str(source), "-o", str(target), "--data-dir", str(data_dir)]
        check_run(argv, where, [source, out])


inputs = st.one_of(
    st.tuples(st.just("bytes"), mutated(SAMPLES)),
    st.tuples(st.just("bytes"), st.binary(max_size=64)),
    st.tuples(st.sampled_from(INPUT_KINDS), st.just(b"")),
)


@BOUNDED
@given(inputs, st.sampled_from(OUTPUT_KINDS))
@pytest.mark.slow
def test_decode_file_handling(data_dir: Path, source: tuple[str, bytes], out_kind: str) -> None:
    run_decode(data_dir, source[0], source[1], out_kind)


# Small shapes only: the import's own limits on a shape are another target's.
compressed = st.one_of(
    st.just(COMPRESSED),
    mutated([COMPRESSED]).filter(lambda b: b"4096" not in b),
)


@BOUNDED
@given(
    st.one_of(
        st.tuples(st.just("bytes"), compressed),
        st.tuples(st.sampled_from(INPUT_KINDS), st.just(b"")),
    ),
    st.sampled_from(OUTPUT_KINDS),
)
def test_import_compressai_file_handling(
    data_dir: Path, source: tuple[str, bytes], out_kind: str
) -> None:
    run_import(data_dir, source[0], source[1], out_kind)


@pytest.mark.fuzz
@LONG
@given(inputs, st.sampled_from(OUTPUT_KINDS), st.sampled_from(["decode", "import"]))
def test_fuzz_cli_files_long(
    data_dir: Path, source: tuple[str, bytes], out_kind: str, command: str
) -> None:
    runner: Callable[[Path, str, bytes, str], Any] = (
        run_decode if command == "decode" else run_import
    )
    runner(data_dir, source[0], source[1], out_kind)


def test_the_fuzz_store_is_not_disturbed(data_dir: Path) -> None:
    """The shared store holds the bundled sets only (no case installed anything)."""
    from wai_dispatch.conformance import sets_dir

    bundled = [p for p in sets_dir().iterdir() if (p / "set.json").is_file()]
    sets = [p for p in (data_dir / "sets").iterdir() if re.fullmatch(r"[0-9a-f]{64}", p.name)]
    assert len(sets) == len(bundled) == 3
    shutil.disk_usage(data_dir)  # the folder is still there and readable
