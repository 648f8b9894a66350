"""``wai-dispatch doctor``: is this machine ready? The data directory (writable), the report
store (reachable), the installed sets (each re-hashed), the offered paths (at least one
present), and what is only told (a browser for the page's checks, a WebGPU adapter). Exit 0
when every check passes, 1 when one fails; nothing is created or changed."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

from wai_dispatch.cli.context import decoder
from wai_dispatch.cli.flags import EXIT_NO, EXIT_OK
from wai_dispatch.cli.options import settings
from wai_dispatch.dispatch.offer import GPU_WGSL
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.store.report_store import ReportStore

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "firefox")
OK, FAIL, INFO = "ok", "FAIL", "info"


def _check(name: str, verdict: str, detail: str) -> dict[str, str]:
    return {"check": name, "verdict": verdict, "detail": detail}


def data_dir_check(root: Path) -> dict[str, str]:
    """Writable where it is, or creatable under its nearest existing parent."""
    if root.is_dir():
        try:
            with tempfile.TemporaryFile(dir=root):
                pass
        except OSError as exc:
            return _check("data dir", FAIL, f"{root}: not writable ({exc.strerror or exc})")
        return _check("data dir", OK, f"{root}: writable")
    if root.exists():
        return _check("data dir", FAIL, f"{root}: a file is in the way")
    parent = next((p for p in root.parents if p.exists()), None)
    if parent is not None and os.access(parent, os.W_OK | os.X_OK):
        return _check("data dir", OK, f"{root}: absent; will be created under {parent}")
    return _check("data dir", FAIL, f"{root}: absent, and {parent} is not writable")


def store_check(url: str) -> dict[str, str]:
    shown = url.split("@")[-1] if "@" in url else url  # never the password of a URL
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
        return _check("report store", OK, f"{shown}: created on first use")
    store = ReportStore(url)
    try:
        up = store.ping()
    finally:
        store.dispose()
    return _check(
        "report store", OK if up else FAIL, f"{shown}: {'reachable' if up else 'unreachable'}"
    )


def sets_checks(ctx: Decoder) -> list[dict[str, str]]:
    store = ctx.set_store
    if not store.root.is_dir():
        return [_check("sets", INFO, "none installed yet: the bundled sets install on first use")]
    out = [
        _check(f"set {digest[:16]}", FAIL, f"damaged: {problem.code}: {problem.message}")
        for digest, problem in sorted(store.damaged().items())
    ]
    for entry in store.list():
        result = store.verify(entry.digest)
        problems = "; ".join(f"{p.code}: {p.message}" for p in result.problems)
        detail = "every file matches its manifest" if result.ok else problems
        out.append(_check(f"set {entry.name}", OK if result.ok else FAIL, detail))
    return out or [_check("sets", INFO, "none installed: the bundled sets install on first use")]


def paths_checks(ctx: Decoder) -> list[dict[str, str]]:
    rows = ctx.probe()
    present = [str(r.path) for r in rows if r.present]
    verdict = OK if present else FAIL
    detail = f"present: {', '.join(present)}" if present else "no path of the offer is present"
    out = [_check("paths", verdict, detail)]
    (gpu,) = ctx.probe([GPU_WGSL])
    out.append(
        _check("gpu (WebGPU)", INFO, "adapter found" if gpu.present else f"absent: {gpu.reason}")
    )
    found = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    out.append(_check("browser", INFO, found or "none found (the page's browser checks skip)"))
    return out


def run(args: argparse.Namespace) -> int:
    chosen = settings(args)
    root = chosen.data_dir
    checks = [data_dir_check(root), store_check(chosen.url)]
    ctx = decoder(args, bundled=False, ready=False)  # nothing created: no folder, no set
    checks += sets_checks(ctx)
    checks += paths_checks(ctx)
    failed = any(c["verdict"] == FAIL for c in checks)
    if args.json:
        print(json.dumps({"ok": not failed, "checks": checks}, indent=2))
    else:
        for c in checks:
            print(f"{c['verdict']:5} {c['check']:28} {c['detail']}")
        print("doctor: ok" if not failed else "doctor: problems found")
    return EXIT_NO if failed else EXIT_OK
