"""``wai-dispatch sets``: list, install, verify and remove the parameter sets in the local store,
and choose a capability's default set (docs/sets.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from wai_dispatch.cli.context import decoder
from wai_dispatch.codec.sets import SetError


def _store(args: argparse.Namespace) -> Any:
    return decoder(args, bundled=False).store


def _emit(args: argparse.Namespace, obj: Any, text: str) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False) if args.json else text)


def _row(entry: Any, default: bool) -> dict[str, Any]:
    return {**entry.to_json(), "default": default}


def run_list(args: argparse.Namespace) -> int:
    ctx = decoder(args)  # installs (or repairs) the bundled sets first
    store = ctx.store
    rows = []
    for entry in store.list():
        try:
            is_default = store.default_for(entry.capability).digest == entry.digest
        except SetError:  # several sets of the capability and none chosen
            is_default = False
        rows.append({**_row(entry, is_default), "damaged": None})
    damaged = store.damaged()
    for digest, problem in sorted(damaged.items()):
        rows.append(
            {
                "digest": digest,
                "name": None,
                "capability": None,
                "version": None,
                "files": None,
                "bytes": None,
                "path": str(store.root / digest),
                "default": False,
                "damaged": {"code": problem.code, "message": problem.message},
            }
        )
    for folder, problem in sorted(ctx.bundled.problems.items()):
        print(
            f"wai-dispatch: bundled set {folder} not installed: {problem.code}: {problem.message}",
            file=sys.stderr,
        )
    lines = [
        f"{r['digest'][:16]}  {r['name']:24} {r['capability']:28} v{r['version']:8} "
        f"{r['files']:3} files {r['bytes']:>12,} B{'  (default)' if r['default'] else ''}"
        if r["damaged"] is None
        else f"{r['digest'][:16]}  damaged: {r['damaged']['code']}: {r['damaged']['message']}"
        for r in rows
    ]
    _emit(args, rows, "\n".join(lines) if lines else f"no sets installed in {store.root}")
    return 0


def run_install(args: argparse.Namespace) -> int:
    entry = decoder(args, bundled=False).install_set(args.source)
    _emit(args, entry.to_json(), f"installed {entry.name} {entry.digest}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    store = _store(args)
    result = store.verify(store.resolve(args.digest))
    if result.ok:
        text = f"{result.digest}: every file matches its manifest"
    else:
        text = "\n".join(
            [f"{result.digest}: {len(result.problems)} problem(s)"]
            + [f"  {p.code}: {p.message}" for p in result.problems]
        )
    _emit(args, result.to_json(), text)
    return 0 if result.ok else 1


def run_remove(args: argparse.Namespace) -> int:
    store = _store(args)
    digest = store.resolve(args.digest)
    store.remove(digest)
    _emit(args, {"removed": digest}, f"removed {digest}")
    return 0


def run_default(args: argparse.Namespace) -> int:
    store = _store(args)
    if args.digest is not None:
        entry = store.set_default(args.capability, store.resolve(args.digest))
    else:
        entry = store.default_for(args.capability)
    _emit(args, _row(entry, True), f"{args.capability}: {entry.name} {entry.digest}")
    return 0
