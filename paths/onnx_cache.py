"""The ONNX path's prepared graphs on disk (docs/onnx-path.md, "The first decode"): the graph a
set's program runs as (:mod:`paths.onnx_rewrite`) and its facts, kept per set digest and build
variant, so a process's first decode need not rewrite the graph again.

The folder is the job's :attr:`paths.job.SynthesisJob.cache_dir` (no folder, no cache). An entry
is used only when its record parses and names the same set digest, variant, :data:`FORMAT` and
onnx version, and the model's bytes hash to the record's BLAKE3; anything else is rebuilt and
written over (temporary name, then rename).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import blake3

from wai_dispatch.dispatch import strictjson
from wai_dispatch.paths.tiling import Reach

#: Bumped whenever the rewrite or the facts change what they produce.
FORMAT = "onnx-prepared-1"

_log = logging.getLogger(__name__)

Prepared = tuple[bytes, list[str], int, Reach | None]


def cache_dir(data_dir: str | os.PathLike[str]) -> Path:
    """Where a decoder on ``data_dir`` keeps its prepared graphs (``<data_dir>/cache/onnx``)."""
    return Path(data_dir) / "cache" / "onnx"


def _names(folder: Path, digest: str, variant: str) -> tuple[Path, Path]:
    stem = f"{digest}.{variant}.{FORMAT}"
    return folder / f"{stem}.onnx", folder / f"{stem}.json"


def _onnx_version() -> str:
    """The installed onnx's version, read from its metadata (importing onnx costs seconds)."""
    try:
        return version("onnx")
    except PackageNotFoundError:  # pragma: no cover - the ONNX path needs onnx to rewrite
        return "none"


def load(folder: Path | None, digest: str, variant: str) -> Prepared | None:
    """The prepared graph of set ``digest`` built as ``variant``, when ``folder`` holds a valid
    entry (module docstring); else ``None`` (and for no folder)."""
    if folder is None:
        return None
    model_path, record_path = _names(folder, digest, variant)
    try:
        record = strictjson.loads(record_path.read_bytes())
        model = model_path.read_bytes()
    except (OSError, ValueError):
        return None
    try:
        expected = (digest, variant, FORMAT, _onnx_version())
        if (record["set"], record["variant"], record["format"], record["onnx"]) != expected:
            return None
        if blake3.blake3(model).hexdigest() != record["blake3"]:
            _log.warning("onnx cache: %s does not match its record; rebuilt", model_path.name)
            return None
        reach = record["reach"]
        tiles = None if reach is None else Reach(*(int(v) for v in reach))
        operations = [str(op) for op in record["operations"]]
        return model, operations, int(record["rewritten"]), tiles
    except (KeyError, TypeError, ValueError):
        return None


def store(folder: Path | None, digest: str, variant: str, prepared: Prepared) -> None:
    """Write the entry of set ``digest`` built as ``variant`` into ``folder`` (none: nothing);
    a disk that refuses is logged, never raised (the decode goes on with what it built)."""
    if folder is None:
        return
    model, operations, rewritten, tiles = prepared
    record: dict[str, Any] = {
        "set": digest,
        "variant": variant,
        "format": FORMAT,
        "onnx": _onnx_version(),
        "blake3": blake3.blake3(model).hexdigest(),
        "operations": operations,
        "rewritten": rewritten,
        "reach": None if tiles is None else [tiles.stride, tiles.before, tiles.after],
    }
    model_path, record_path = _names(folder, digest, variant)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path, data in ((model_path, model), (record_path, json.dumps(record).encode())):
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
            tmp.write_bytes(data)
            os.replace(tmp, path)
    except OSError as exc:
        _log.warning("onnx cache: could not write %s: %s", folder, exc)
