"""``wai-dispatch policy``: show, set and check the operator's model policy (docs/policy.md).
``show`` and ``set`` work on the policy in the report store; ``check`` judges a run report
offline: 0 accepted, 1 refused (every reason listed), 2 input that does not read.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import Any

from wai_dispatch.cli.flags import EXIT_NO, is_stdio
from wai_dispatch.cli.options import emit, settings
from wai_dispatch.cli.remote import verdict_text
from wai_dispatch.codec.files import FileError
from wai_dispatch.service.governance import judge, load_policy, loads_run_report


def _history(args: argparse.Namespace) -> Any:
    """The policy's versions in the report store (migrated first, as ``serve`` would). The
    store (SQLAlchemy) loads here, on use: ``policy check`` judges offline without it."""
    from wai_dispatch.service.store.policies import PolicyStore
    from wai_dispatch.service.store.report_store import ReportStore

    store = ReportStore(settings(args).url)
    store.migrate()
    return PolicyStore(store)


def _read(path: Path) -> bytes:
    if is_stdio(path):  # `-`: standard input
        return sys.stdin.buffer.read()
    try:
        return path.read_bytes()
    except OSError as exc:
        raise FileError(f"cannot read {path}: {exc.strerror}") from None


def run_show(args: argparse.Namespace) -> int:
    history = _history(args)
    if args.history:
        rows = [v.to_json(with_text=False) for v in history.versions()]
        lines = [f"v{r['version']}  {r['set_ms']}  {r['set_by']}  {r['sha256'][:16]}" for r in rows]
        emit(args, rows, "\n".join(lines) if lines else "no model policy has been set")
        return 0
    version = history.get(args.version) if args.version else history.current()
    head = f"# policy v{version.version}, set by {version.set_by} at {version.set_ms} ms\n"
    emit(args, version.to_json(), head + version.text.rstrip("\n"))
    return 0


def run_set(args: argparse.Namespace) -> int:
    data = _read(args.file)
    load_policy(data, source=str(args.file))  # the error names this file and its line
    version = _history(args).set(data, by=args.by or getpass.getuser())
    emit(
        args,
        version.to_json(with_text=False),
        f"policy v{version.version} in force (sha256 {version.sha256[:16]}…)",
    )
    return 0


def run_check(args: argparse.Namespace) -> int:
    run = loads_run_report(_read(args.run_report))
    if args.policy is not None:
        policy, number = load_policy(_read(args.policy), source=str(args.policy)), None
    else:
        current = _history(args).current()
        policy, number = current.policy(), current.version
    verdict = judge(run, policy, policy_version=number)
    doc = verdict.to_json()
    emit(args, doc, verdict_text(doc))
    return 0 if verdict.accepted else EXIT_NO  # refused: a negative answer
