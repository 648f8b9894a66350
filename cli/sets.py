"""``wai-dispatch sets``: list, install, verify and remove the parameter sets, and choose a
capability's default set (docs/sets.md). Installs, removals and defaults go through the set
registry in the report database (``WAI_DATABASE_URL``, else ``<data_dir>/reports.db``), as the
service's do, so every replica on that database sees them; the data directory's store is this
machine's cache of the registry, synced first."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from wai_dispatch.cli.context import decoder
from wai_dispatch.cli.options import emit, settings
from wai_dispatch.codec.sets import SetError
from wai_dispatch.conformance import sets_dir
from wai_dispatch.service.store.report_store import ReportStore, StoreDown
from wai_dispatch.service.store.setregistry import SetRegistry
from wai_dispatch.service.store.setsync import SetSync, registry_down


@contextmanager
def _registry(args: argparse.Namespace, *, bootstrap: bool = True) -> Iterator[SetSync]:
    """The set registry of the command's database and the local cache synced with it (the
    cache's unknown sets and, with ``bundled_sets`` on, the bundled sets put into it first:
    what the service does at start). A database that does not answer: ``set_registry_down``."""
    chosen = settings(args)
    cache = decoder(args, bundled=False)  # a bad data directory is data_dir_invalid first
    store = ReportStore(chosen.url)
    try:
        store.migrate()
        sync = SetSync(
            SetRegistry(store),
            cache,
            chosen.sets_refresh_s,
            bundled=sets_dir() if chosen.bundled_sets else None,
            repair=False,  # a damaged copy is shown as it is (the service fetches it again)
        )
        if bootstrap:
            for folder, problem in sorted(sync.bootstrap().items()):
                print(
                    f"wai-dispatch: bundled set {folder} not installed: "
                    f"{problem.code}: {problem.message}",
                    file=sys.stderr,
                )
        yield sync
    except StoreDown as exc:
        raise registry_down(exc) from None
    finally:
        store.dispose()


def _row(entry: Any, default: bool) -> dict[str, Any]:
    return {**entry.to_json(), "default": default}


def run_list(args: argparse.Namespace) -> int:
    with _registry(args) as sync:
        store = sync.cache
        rows = []
        for entry in store.list():
            try:
                is_default = store.default_for(entry.capability).digest == entry.digest
            except SetError:  # several sets of the capability and none chosen
                is_default = False
            rows.append({**_row(entry, is_default), "damaged": None})
        problems = {**sync.state.problems}
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
    for digest, problem in sorted(problems.items()):
        print(
            f"wai-dispatch: set {digest} not fetched from the registry: "
            f"{problem.code}: {problem.message}",
            file=sys.stderr,
        )
    lines = [
        f"{r['digest'][:16]}  {r['name']:24} {r['capability']:28} v{r['version']:8} "
        f"{r['files']:3} files {r['bytes']:>12,} B{'  (default)' if r['default'] else ''}"
        if r["damaged"] is None
        else f"{r['digest'][:16]}  damaged: {r['damaged']['code']}: {r['damaged']['message']}"
        for r in rows
    ]
    emit(args, rows, "\n".join(lines) if lines else f"no sets installed in {store.root}")
    return 0


def run_install(args: argparse.Namespace) -> int:
    with _registry(args, bootstrap=False) as sync:
        entry = sync.cache.get(sync.install(args.source))
    emit(args, entry.to_json(), f"installed {entry.name} {entry.digest}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    store = decoder(args, bundled=False).set_store  # this machine's copy, as it is
    result = store.verify(store.resolve(args.digest))
    if result.ok:
        text = f"{result.digest}: every file matches its manifest"
    else:
        text = "\n".join(
            [f"{result.digest}: {len(result.problems)} problem(s)"]
            + [f"  {p.code}: {p.message}" for p in result.problems]
        )
    emit(args, result.to_json(), text)
    return 0 if result.ok else 1


def run_remove(args: argparse.Namespace) -> int:
    with _registry(args, bootstrap=False) as sync:
        digest = sync.registry.resolve(args.digest)
        sync.remove(digest)
    emit(args, {"removed": digest}, f"removed {digest}")
    return 0


def run_default(args: argparse.Namespace) -> int:
    with _registry(args) as sync:
        store = sync.cache
        if args.digest is not None:
            digest = sync.registry.resolve(args.digest)
            sync.set_default(args.capability, digest)
        entry = store.default_for(args.capability)
    emit(args, _row(entry, True), f"{args.capability}: {entry.name} {entry.digest}")
    return 0
