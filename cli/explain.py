"""``wai-dispatch explain``: what §2 and §3 say of a decode, against an offer."""

from __future__ import annotations

import argparse
import json

from wai_dispatch.dispatch import (
    REFERENCE_OFFER,
    REGISTRY,
    Pin,
    UnknownCapability,
    admit,
    demand,
    parse_offer,
)


def run(args: argparse.Namespace) -> int:
    if args.capability not in REGISTRY:
        known = ", ".join(sorted(REGISTRY))
        raise UnknownCapability(f"--capability {args.capability[:80]!r}: known are {known}")
    cap = REGISTRY[args.capability]
    offer = parse_offer(args.offer) if args.offer else REFERENCE_OFFER
    pins = [Pin(cap.name, "", args.pin_tier)] if args.pin_tier is not None else []
    needed = demand(cap, intent=args.intent, pins=pins)
    rows = [
        {
            "path": path.to_json(),
            "admitted": (code := admit(path, needed, cap)) is None,
            "reason": None if code is None else str(code),
        }
        for path in offer
    ]
    if args.json:
        print(json.dumps({"capability": cap.name, "needed": str(needed), "paths": rows}))
        return 0
    print(f"{cap.name} ({cap.registry_class}, registered {cap.registered_tier}) needs {needed}")
    for path, row in zip(offer, rows, strict=True):
        verdict = "admitted by §3" if row["admitted"] else f"refused: {row['reason']}"
        print(f"  {path!s:28} {verdict}")
    return 0
