"""``wai-dispatch evidence``: §8's figures on this machine (:meth:`Decoder.evidence`, in
service/decoding/evidence.py), printed as a table or JSON, and written to ``--out``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from wai_dispatch.cli.context import decoder
from wai_dispatch.cli.flags import EXIT_NO, EXIT_OK
from wai_dispatch.codec.files import write_atomic


def run(args: argparse.Namespace) -> int:
    result = decoder(args).evidence(args.set)
    doc = result.to_json()
    if args.out is not None:
        write_atomic(args.out, (json.dumps(doc, indent=2) + "\n").encode())
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        for item in doc["sets"]:
            print("\n".join(set_lines(item)))
        print("evidence: ok" if result.ok else "evidence: FAILED")
    return EXIT_OK if result.ok else EXIT_NO


def set_lines(item: dict[str, Any]) -> list[str]:
    """One set's table: its symbols against the CPU reference's, then one line per path."""
    same = "equal" if item["symbols_equal"] else "DIFFER"
    lines = [f"{item['capability']}  set {item['set'][:16]}…"]
    if item["problem"] is not None:
        return [*lines, f"  FAIL {item['problem']}"]
    lines.append(
        f"  symbols {str(item['symbols_digest'])[:16]}… vs the CPU reference's "
        f"{str(item['reference_symbols_digest'])[:16]}…: {same}"
    )
    for row in item["paths"]:
        verdict = {True: "ok  ", False: "FAIL", None: "    "}[row.get("ok")]
        lines.append(f"  {verdict} {row['path']:24} {_figures(row)}")
        for case in row.get("corpus", []):
            mark = "ok  " if case["ok"] else "FAIL"
            got = str(case.get("got") or case.get("reason"))[:16]
            lines.append(f"         corpus {mark} {case['payload']:26} {got}…")
    return lines


def _figures(row: dict[str, Any]) -> str:
    if not row["present"]:
        return f"absent: {row['reason']}"
    replicate = f"; replicate {row['replicate']}" if "replicate" in row else ""
    if not row["ran"]:
        return f"refused {row['code']}: {row['reason']}{replicate}"
    placement = row["placement"]
    where = (
        "placement null"
        if placement is None
        else " ".join(f"{k}={v}" for k, v in placement.items() if v)
    )
    text = f"ran on {row['unit']}, {where}, tier {row['tier']}"
    if "samples_differing" in row:
        db = "identical" if row["identical"] else f"{row['psnr_db']:.2f} dB"
        text += (
            f", {db}, {row['samples_differing']} of {row['samples']} samples differ "
            f"(at most {row['max_difference']})"
        )
    elif "corpus" in row:
        text += f", corpus {sum(c['ok'] for c in row['corpus'])}/{len(row['corpus'])} equal"
    return text + replicate
