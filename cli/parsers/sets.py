"""The parsers of ``sets list|install|verify|remove|default`` (run by :mod:`cli.sets`): the
set registry every replica reads, cached in the data directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from wai_dispatch.cli.flags import Sub, command, runs, verb_options


def add(sub: Sub) -> None:
    common = verb_options()
    p = command(
        sub,
        "sets",
        "wai-dispatch sets list\nwai-dispatch sets install bmshj2018-q3.tar.gz\n"
        "wai-dispatch sets verify 3f9a",
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)

    v = command(
        verbs,
        "list",
        "wai-dispatch sets list --json",
        help="installed sets (synced from the registry first)",
        parents=[common],
    )
    runs(v, "sets:run_list")

    v = command(
        verbs,
        "install",
        "wai-dispatch sets install ./bmshj2018-q3/",
        help="install a set folder or archive",
        parents=[common],
    )
    v.add_argument("source", type=Path, help="a set folder, or a .tar, .tar.gz or .zip of one")
    runs(v, "sets:run_install")
    _add_verbs_on_one_set(verbs, common)


def _add_verbs_on_one_set(verbs: Sub, common: argparse.ArgumentParser) -> None:
    """``verify``, ``remove`` and ``default``: the verbs that name an installed set."""
    v = command(
        verbs,
        "verify",
        "wai-dispatch sets verify 3f9a",
        help="re-hash every file of a set's copy here",
        parents=[common],
    )
    v.add_argument("digest", help="the set's digest (or a unique prefix of it)")
    runs(v, "sets:run_verify")

    v = command(
        verbs,
        "remove",
        "wai-dispatch sets remove 3f9a",
        help="remove a set (a tombstone: it stays removed)",
        parents=[common],
    )
    v.add_argument("digest", help="the set's digest (or a unique prefix of it)")
    runs(v, "sets:run_remove")

    v = command(
        verbs,
        "default",
        "wai-dispatch sets default wai.neural.bmshj2018\n"
        "wai-dispatch sets default wai.neural.bmshj2018 3f9a",
        help="the set a capability decodes with when unnamed",
        parents=[common],
    )
    v.add_argument("capability")
    v.add_argument("digest", nargs="?", help="make this set the default (omit to show it)")
    runs(v, "sets:run_default")
