"""The parsers of ``decode``, ``demo`` and ``report`` (run by :mod:`cli.decode` and
:mod:`cli.remote`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from wai_dispatch.cli.flags import (
    STDIO,
    Sub,
    add_data_dir,
    add_json,
    add_offer,
    command,
    runs,
    setting_flags,
)

NO_LIMITS = "--no-limits"
RETRIES = 5
TIMEOUT_S = 60.0


def add(sub: Sub) -> None:
    p = command(
        sub,
        "decode",
        f"""
wai-dispatch decode envelope.json -o picture.png
cat envelope.cbor | wai-dispatch decode {STDIO} -o {STDIO} > picture.png
wai-dispatch decode envelope.json --url http://decoder:8080 --token-file sink.token -o out.png""",
    )
    p.add_argument("envelope", type=Path, help=f"envelope file, JSON or CBOR ({STDIO}: stdin)")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help=f"PNG to write ({STDIO}: stdout; the report then goes to stderr)",
    )
    p.add_argument(
        "--url",
        help="post to the service at URL instead of decoding here (no local decoder or data "
        "directory is opened)",
    )
    _remote(p)
    add_offer(p)
    add_data_dir(p)
    add_json(p)
    _no_limits(p)
    runs(p, "decode:run_decode", remote="remote:run_decode")

    d = command(sub, "demo", "wai-dispatch demo -o out")
    d.add_argument("-o", "--out-dir", type=Path, default=Path("out"), help="folder of PNGs")
    add_offer(d)
    add_data_dir(d)
    add_json(d)
    _no_limits(d)
    runs(d, "decode:run_demo")

    r = command(
        sub,
        "report",
        f"""
wai-dispatch report run-report.json --url http://decoder:8080 --token-file sink.token
produce-run-report | wai-dispatch report {STDIO} --url http://decoder:8080 --json""",
    )
    r.add_argument(
        "run_report", type=Path, metavar="RUNREPORT", help=f"a run report file ({STDIO}: stdin)"
    )
    r.add_argument("--url", required=True, help="the service's base URL")
    _remote(r)
    add_json(r)
    runs(r, "remote:run_report", remote="remote:run_report")


def _remote(p: argparse.ArgumentParser) -> None:
    p.add_argument("--token", help="bearer token for --url (default: WAI_TOKEN, WAI_TOKEN_FILE)")
    p.add_argument("--token-file", metavar="FILE", help="a file holding the bearer token")
    setting_flags(p, "token", "token_file")
    p.add_argument(
        "--retries",
        type=int,
        default=RETRIES,
        metavar="N",
        help=f"retries of a connection error, 429, 502, 503 or 504, with backoff and jitter "
        f"(Retry-After honoured; default {RETRIES})",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_S,
        metavar="S",
        help=f"seconds for each request to connect and answer (default {TIMEOUT_S:g})",
    )


def _no_limits(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        NO_LIMITS,
        action="store_true",
        help="decode even when the time or memory estimate is over the service's limits "
        "(max_latent_elements, memory_budget_bytes, decode_timeout_s)",
    )
