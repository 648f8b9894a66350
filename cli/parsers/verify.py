"""The parser of ``verify`` (run by :mod:`cli.verify`)."""

from __future__ import annotations

from wai_dispatch.cli.flags import Sub, add_data_dir, add_json, command, runs


def add(sub: Sub) -> None:
    p = command(
        sub,
        "verify",
        "§6.4 agreement of every path here on each set's payload",
        "wai-dispatch verify\nwai-dispatch verify --json > verify.json",
    )
    add_data_dir(p)
    add_json(p)
    runs(p, "verify:run")
