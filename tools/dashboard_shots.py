"""``python -m wai_dispatch.tools.dashboard_shots [--out docs/img]``: docs/dashboard.md's
screenshots (1440×900 and 390 px wide) of a fleet made through the public API only
(:func:`populate`, which the dashboard's browser tests drive too), on a fresh service, in
Chromium. The dashboard shows the last 24 hours, so the images differ in bytes run to run."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import httpx

from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.service.settings import load
from wai_dispatch.service.store import bearer as tk
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.tools._service import serve
from wai_dispatch.tools.harness import free_port
from wai_dispatch.tools.seed_reports import BMSHJ, NPU, ORT, dispatch_report

A, B, C = "a1" * 32, "b2" * 32, "c3" * 32  # sets: A allowed to kiosks, C to the archive, B to none
SINKS = {
    "kiosk-1": "kiosk",
    "kiosk-2": "kiosk",
    "archive-1": "archive",
    "lab-1": "lab",
    "loose-1": None,
}


def policy(version: int) -> str:
    """The model policy, version 1 or 2 (2 adds the ``lab`` class)."""
    lab = (
        f"""  lab:
    sinks: [lab-1]
    tiers: [none]
    sets: [{{digest: {A}}}]
"""
        if version == 2
        else ""
    )
    return f"""format: wai-model-policy/1
classes:
  kiosk:
    sinks: [kiosk-1, kiosk-2]
    tiers: [none]
    sets: [{{capability: {BMSHJ}, digests: [{A}]}}]
  archive:
    sinks: [archive-1]
    tiers: [none]
    sets: [{{digest: {C}}}]
{lab}"""


def report(unit: str) -> dict[str, Any]:
    """A wai-neural-dispatch/1 report: ran on ``npu`` or ``cpu`` (the NPU refused), or none."""
    if unit == "npu":
        placement = {"npu": 21, "gpu": 0, "cpu": 0, "unknown": 0}
        ran: Any = {**NPU, "tier": "none", "placement": placement}
        refused: list[Any] = []
    elif unit == "cpu":
        ran = {**ORT, "tier": "none", "placement": None}
        refused = [{**NPU, "reason": "dispatch_unit_absent"}]
    else:
        ran = None
        refused = [
            {**NPU, "reason": "dispatch_unit_absent"},
            {**ORT, "reason": "dispatch_not_placed"},
        ]
    return dispatch_report(BMSHJ, "none", ran, refused)


def run_report(run_id: str, sink: str, decodes: list[tuple[str, str]]) -> bytes:
    """A wai-run-report/1 of ``decodes`` (set digest, unit)."""
    body = {
        "format": "wai-run-report/1",
        "id": run_id,
        "sink": sink,
        "decodes": [
            {"set_digest": s, "symbols_digest": "4" * 64, "report": report(u)} for s, u in decodes
        ],
    }
    return json.dumps(body).encode()


class Fleet(dict[str, Any]):
    """What :func:`populate` made: ``refused_runs`` (ids), ``big_run``, ``decode_ids`` …"""


def populate(url: str, tokens: dict[str, str], envelope: bytes) -> Fleet:
    """Make the fleet through the public API: ``tokens`` holds ``admin``, one sink token per
    :data:`SINKS` and ``sink-a`` (the service's own decodes of ``envelope``)."""
    made = Fleet(refused_runs=[], decode_ids=[])

    def client(who: str) -> httpx.Client:
        return httpx.Client(
            base_url=url, timeout=120, headers={"Authorization": f"Bearer {tokens[who]}"}
        )

    def submit(sink: str, run_id: str, decodes: list[tuple[str, str]]) -> dict[str, Any]:
        with client(sink) as c:
            answer = c.post(
                "/v1/run-reports",
                content=run_report(run_id, sink, decodes),
                headers={"Content-Type": "application/json"},
            )
        answer.raise_for_status()
        verdict: dict[str, Any] = answer.json()
        if not verdict["accepted"]:
            made["refused_runs"].append(run_id)
        return verdict

    with client("admin") as c:
        c.put("/v1/policy", content=policy(1), headers={"Content-Type": "application/yaml"})
    for i in range(4):  # kiosks on the NPU with the allowed set: accepted
        submit("kiosk-1", f"k1-{i}", [(A, "npu")] * 5)
    submit("kiosk-2", "k2-0", [(A, "npu"), (A, "cpu"), (A, "none")])
    for i in range(10):  # kiosk-2 runs set B, which no class allows: refused
        submit("kiosk-2", f"k2-bad-{i}", [(B, "cpu"), (A, "npu")])
    made["big_run"] = "k2-big"
    submit("kiosk-2", "k2-big", [(B, "cpu")] * 50)  # 50 reasons, one per decode
    submit("archive-1", "ar-0", [(C, "cpu")] * 4)
    submit("loose-1", "lo-0", [(A, "npu"), (A, "none")])  # no class names it: refused
    with client("admin") as c:
        c.put("/v1/policy", content=policy(2), headers={"Content-Type": "application/yaml"})
    submit("lab-1", "lab-0", [(A, "npu")] * 3)
    with client("sink-a") as c:  # the service's own decodes: time, duration, RGB digest
        for _ in range(2):
            answer = c.post(
                "/v1/decode", content=envelope, headers={"Content-Type": "application/json"}
            )
            answer.raise_for_status()
    with client("kiosk-1") as c:  # malformed envelopes: 4xx request errors of a known sink
        for body in (b"{", b"[]", b'{"format": "wai-envelope/1"}'):
            c.post("/v1/decode", content=body, headers={"Content-Type": "application/json"})
    with httpx.Client(base_url=url, headers={"Authorization": "Bearer never-issued"}) as c:
        c.get("/v1/reports")  # a 401, no sink
    return made


VIEWPORTS: dict[str, Any] = {
    "1440": {"width": 1440, "height": 900},
    "390": {"width": 390, "height": 844},
}


def shoot(url: str, operator: str, out: Path) -> list[Path]:
    """The dashboard at each of :data:`VIEWPORTS` as ``dashboard-<width>.png``: the whole page
    at 1440×900, the first three screens at 390 px."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            headless=True,
            args=["--no-sandbox", "--disable-gpu"],
        )
        try:
            for name, size in VIEWPORTS.items():
                page = browser.new_page(viewport=size)
                page.goto(f"{url}/dashboard/")
                page.fill("#token", operator)
                page.click("#login-form button[type=submit]")
                page.wait_for_selector("#t-sets tbody td.digest", timeout=60_000)
                path = out / f"dashboard-{name}.png"
                tall = int(page.evaluate("document.documentElement.scrollHeight"))
                # the wide view whole; the narrow one's first three screens (it is 15 tall)
                high = tall if size["width"] >= 1000 else min(tall, 3 * size["height"])
                clip: Any = {"x": 0, "y": 0, "width": size["width"], "height": high}
                page.screenshot(path=str(path), full_page=True, clip=clip)
                written.append(path)
                page.close()
        finally:
            browser.close()
    return written


def main(argv: list[str] | None = None) -> int:

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("docs/img"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="wai-shots-") as tmp:
        settings = load(
            data_dir=Path(tmp), host="127.0.0.1", port=free_port(), warm=False, log_level="error"
        )
        store = ReportStore(settings.url)
        store.migrate()
        made = {name: tk.create(store, name, tk.Role.sink) for name in [*SINKS, "sink-a"]}
        made["operator"] = tk.create(store, "ops", tk.Role.operator)
        made["admin"] = tk.create(store, "root", tk.Role.admin)
        store.dispose()
        with serve(settings) as url:
            envelope = (envelopes_dir() / "bmshj2018-demo-q3.json").read_bytes()
            populate(url, made, envelope)
            for path in shoot(url, made["operator"], args.out):
                print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
