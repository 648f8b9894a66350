"""The parsers of ``verify`` and ``evidence`` (run by :mod:`cli.verify`, :mod:`cli.evidence`)."""

from __future__ import annotations

from pathlib import Path

from wai_dispatch.cli.flags import Sub, add_data_dir, add_json, command, runs


def add(sub: Sub) -> None:
    p = command(sub, "verify", "wai-dispatch verify\nwai-dispatch verify --json > verify.json")
    add_data_dir(p)
    add_json(p)
    runs(p, "verify:run")
    _evidence(sub)


def _evidence(sub: Sub) -> None:
    p = command(
        sub,
        "evidence",
        "wai-dispatch evidence\n"
        "wai-dispatch evidence --set ~/npu-set --out evidence.json\n"
        "wai-dispatch evidence --json",
    )
    p.add_argument(
        "--set",
        type=Path,
        metavar="DIR",
        help="a set folder outside the store (default: every installed set)",
    )
    p.add_argument("--out", type=Path, metavar="FILE", help="also write the JSON to FILE")
    add_data_dir(p)
    add_json(p)
    runs(p, "evidence:run")
