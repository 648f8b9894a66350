"""Decode outcomes as the CLI prints them, from their JSON form (what a local decode returns
and what the service answers alike): the envelope, each capability's reports (refused paths
in the order offered, then the path that ran), the picture or the error, the symbols digest.
The standard library only: ``decode --url`` prints through it without loading the core."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable

from wai_dispatch.cli.flags import is_stdio

TYPE_CHECKING = False  # typing's own costs ~4 ms of the sink client's start-up
if TYPE_CHECKING:
    from typing import Any, TextIO, TypeAlias

#: Why a refusal happened, in words, from its JSON (``{unit, backend, arithmetic, reason}``);
#: a local decode says it (§7's meaning, an absent unit's adapter's words), ``--url`` does not.
if TYPE_CHECKING:
    Why: TypeAlias = Callable[[dict[str, Any]], str]


def path_name(obj: dict[str, Any]) -> str:
    return f"{obj['unit']}/{obj['backend']}/{obj['arithmetic']}"


def print_outcomes(
    outcomes: list[dict[str, Any]],
    *,
    as_json: bool,
    out: TextIO | None = None,
    why: Why | None = None,
) -> None:
    """The outcomes as text (or JSON) on ``out`` (default stdout)."""
    out = sys.stdout if out is None else out
    if as_json:
        json.dump(outcomes if len(outcomes) > 1 else outcomes[0], out, indent=2)
        print(file=out)
        return
    print_ = functools.partial(print, file=out)
    for outcome in outcomes:
        shown = "(standard input)" if is_stdio(outcome["envelope"]) else outcome["envelope"]
        if not is_stdio(shown):
            relative = os.path.relpath(shown)
            shown = relative if not relative.startswith("..") else shown
        print_(shown)
        for skipped in outcome.get("undecodable", []):
            print_(f"  {skipped['capability']}: not decodable here: {skipped['code']}")
        error = None if outcome["decoded"] else outcome["error"]
        # A set not installed is said once, by the error line: its reports refuse every path
        # with dispatch_program_absent only because there is no set to hold a program (§4.2).
        if error is None or error["code"] != "set_not_installed":
            for report in outcome["reports"]:
                print_(describe(report, why))
        if outcome["decoded"]:
            pic = outcome["picture"]
            where = f" → {outcome['output']}" if "output" in outcome else ""
            print_(f"  picture  {pic['width']}×{pic['height']} RGB8{where}")
        else:
            assert error is not None
            what = "no path" if error["code"] == "decode_no_path" else error["code"]
            print_(f"  {what}  {error['message']}")
        if outcome.get("symbols_digest"):
            print_(f"  symbols  blake3 {outcome['symbols_digest']}")
        print_()


def describe(report: dict[str, Any], why: Why | None = None) -> str:
    """One report (``wai-neural-dispatch/1`` JSON) as lines."""
    lines = [f"  {report['capability']}: needs {report['needed']}"]
    for refusal in report["refused"]:  # in the order offered (§5), before the path that ran
        said = f": {why(refusal)}" if why is not None else ""
        lines.append(f"    refused  {path_name(refusal):26} {refusal['reason']}{said}")
    ran = report["ran"]
    if ran is None:
        lines.append("    ran      none")
    else:
        placement = ran["placement"]
        where = (
            "none stated"
            if placement is None
            else " ".join(f"{unit}={n}" for unit, n in placement.items() if n)
        )
        lines.append(f"    ran      {path_name(ran):26} tier {ran['tier']}, placement {where}")
    return "\n".join(lines)
