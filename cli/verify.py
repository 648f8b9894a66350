"""``wai-dispatch verify``: §6.4 agreement on every installed set that carries a payload
(:func:`service.decoding.verify.verify_store`), printed; a progress bar on a terminal."""

from __future__ import annotations

import argparse
import json

from wai_dispatch.cli import progress
from wai_dispatch.cli.context import decoder
from wai_dispatch.service.decoding.verify import PSNR_BOUND_DB


def run(args: argparse.Namespace) -> int:
    ctx = decoder(args)
    with progress.bar("verify") as shown:  # on a terminal only

        def on_set(done: int, total: int, name: str) -> None:
            shown.update(done, total, name)

        result = ctx.verify(on_set)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0 if result.ok else 1
    for folder, problem in sorted(ctx.bundled.problems.items()):
        print(f"bundled set {folder} not installed: {problem.code}: {problem.message}")
    for r in result.sets:
        print(f"{r.name}  {r.digest[:16]}…")
        if r.damaged is not None:
            for p in r.damaged:
                print(f"  FAIL damaged: {p.get('code')}: {p.get('message', p.get('file'))}")
        if r.skipped is not None:
            print(f"  skipped: {r.skipped}")
        for c in r.checks:
            verdict = {True: "ok  ", False: "FAIL", None: "n/a "}[c["ok"]]
            if c["check"] == "symbols_digest":
                print(
                    f"  {verdict} symbols digest {c['got'][:16]}… (expected {c['expected'][:16]}…)"
                )
            elif c["check"] == "psnr" and "psnr_db" in c:
                db = "identical" if c["identical"] else f"{c['psnr_db']:.2f} dB"
                print(
                    f"  {verdict} {c['path']:40} {db} vs the CPU reference "
                    f"(bound {PSNR_BOUND_DB:g} dB)"
                )
            elif c["check"] == "program":
                what = f"{c.get('operations')} operations, bound rule holds"
                print(f"  {verdict} wai-ops program: {c.get('reason') or what}")
            elif c["check"] == "corpus":
                got = str(c.get("got", c.get("reason")))
                print(f"  {verdict} corpus {c['payload']:28} {got[:16]}…")
            elif c["check"] == "payload":
                print(f"  {verdict} the set's payload does not decode: {c['reason']}")
            else:
                print(f"  {verdict} {c['path']:40} cannot run here: {c['reason']}")
    print("verify: ok" if result.ok else "verify: FAILED")
    return 0 if result.ok else 1
