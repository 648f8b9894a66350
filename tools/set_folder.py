"""Writing a finished set's files into its folder, all or nothing: the set writers
(``wai_bmshj2018_npu_set``, ``wai_int_synth_set``, ``wai_bmshj2018_hyperprior_set``) hand over
their files' bytes and manifest members; the folder appears whole (``set.json`` written last, by
:func:`codec.sets.write_manifest`) or not at all."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wai_dispatch.codec.sets import Manifest, write_manifest
from wai_dispatch.tools.bmshj2018_model import SetWriterError


def write_set_folder(
    out: Path,
    files: Mapping[str, bytes],
    *,
    name: str,
    capability: str,
    version: str,
    facts: dict[str, Any],
    overwrite: bool,
) -> Manifest:
    """Write ``files`` and their manifest into a temporary sibling of ``out``, then rename it
    into place; a non-empty ``out`` is replaced only with ``overwrite`` (else
    :class:`SetWriterError`). Nothing is left behind on failure."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        for file_name, data in files.items():
            (tmp / file_name).write_bytes(data)
        manifest = write_manifest(
            tmp, name=name, capability=capability, version=version, facts=facts
        )
        _install(tmp, out, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _install(tmp: Path, out: Path, overwrite: bool) -> None:
    """Rename the finished set into place (the old one, with ``overwrite``, removed after)."""
    if out.exists():
        if not overwrite and any(out.iterdir()):
            raise SetWriterError(f"{out} exists and is not empty (pass --force to replace it)")
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
        try:
            tmp.rename(out)
        except BaseException:
            old.rename(out)
            raise
        shutil.rmtree(old)
    else:
        tmp.rename(out)


def write_from(write_set: Callable[..., Path], options: Mapping[str, Any]) -> Path:
    """``write_set`` with a writer's parsed ``options``: ``out`` and ``force`` as its ``out_dir``
    and ``overwrite``, every other by its name; its log on standard error."""
    kwargs = dict(options)
    out, force = kwargs.pop("out"), kwargs.pop("force")
    return write_set(out, overwrite=force, log=lambda msg: print(msg, file=sys.stderr), **kwargs)


def writer_main(
    argv: Sequence[str] | None,
    parser: argparse.ArgumentParser,
    run: Callable[[argparse.Namespace], Path],
    refused: type[Exception],
) -> int:
    """A set writer's command: exit status 2 and one ``error:`` line when the set is refused."""
    try:
        run(parser.parse_args(argv))
    except refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
