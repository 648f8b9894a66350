"""The sink's client of the service: ``decode --url`` posts an envelope, ``report --url`` a run
report. Nothing local is opened: no decoder, no data directory (the service decodes and
judges). Every call is retried on a connection error and on 429, 502, 503 and 504 with
exponential backoff and jitter (:func:`backoff`), a ``Retry-After`` honoured; ``--timeout``
bounds each attempt. The service's answers print as it gave them.

Exit statuses (docs/cli.md): no usable answer after the retries is :class:`RemoteUnreachable`
(3); an error the service answered (a 4xx: token, role, a refused envelope) is
:class:`RemoteError` (4), its code and message the service's own."""

from __future__ import annotations

import argparse
import base64
import email.utils
import json
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wai_dispatch.cli.codes import CliCode
from wai_dispatch.cli.flags import EXIT_NO, EXIT_OK, EXIT_REFUSED, EXIT_UNREACHABLE
from wai_dispatch.cli.options import settings
from wai_dispatch.cli.streams import read_envelope, read_input
from wai_dispatch.dispatch.errors import WaiError

#: Statuses worth another attempt: the service is busy or a proxy lost it for a moment.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
RETRY_AFTER_CAP_S = 60.0
#: A run report's JSON is at most this (the service's limit, docs/run-reports.md).
MAX_RUN_REPORT_BYTES = 16 * 1024 * 1024


class RemoteError(WaiError):
    """The service answered with an error of its own (its code kept): exit 4."""

    code = CliCode.REMOTE_ERROR
    exit_status = EXIT_REFUSED


class RemoteUnreachable(WaiError):
    """No usable answer: no connection, a timeout, or 5xx/429 still after the retries: exit 3."""

    code = CliCode.REMOTE_UNREACHABLE
    exit_status = EXIT_UNREACHABLE


class RemoteInvalid(RemoteUnreachable):
    """An answer that is not the service's JSON (a proxy's page, say): exit 3."""

    code = CliCode.REMOTE_INVALID


def backoff(attempt: int, rng: Callable[[], float] = random.random) -> float:
    """Seconds before retry ``attempt`` (0, 1, …): the exponential step ``BASE·2^attempt``
    capped at ``CAP``, half of it fixed and half drawn at random ("equal jitter"), so that
    sinks that failed together do not come back together, and never sooner than half."""
    step = min(BACKOFF_CAP_S, BACKOFF_BASE_S * float(2**attempt))
    return step / 2 + rng() * step / 2


def retry_after(
    value: str | None, now: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> float | None:
    """A ``Retry-After`` header's seconds (delta-seconds or an HTTP date), capped; ``None``
    when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return min(float(text), RETRY_AFTER_CAP_S)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return min(max(0.0, (when - now()).total_seconds()), RETRY_AFTER_CAP_S)


def call(
    url: str,
    route: str,
    data: bytes,
    *,
    content_type: str,
    token: str | None,
    retries: int = 5,
    timeout: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
    transport: Any = None,
) -> tuple[int, dict[str, Any]]:
    """POST ``data`` to ``url`` + ``route``; the final status and JSON body. Retries (at most
    ``retries``) a connection error, a timeout while connecting, a dropped connection, and
    429/502/503/504. Raises :class:`RemoteUnreachable` when no answer came, and
    :class:`RemoteInvalid` for an answer without JSON."""
    import httpx  # ~0.3 s: only a command that calls a service pays for it

    headers = {"Content-Type": content_type, "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    target = url.rstrip("/") + route
    with httpx.Client(timeout=timeout, transport=transport) as client:
        attempt = 0
        while True:
            try:
                r = client.post(target, content=data, headers=headers)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError,
                    httpx.ReadError, httpx.WriteError) as exc:  # fmt: skip
                if attempt >= retries:
                    raise RemoteUnreachable(
                        f"{target}: {exc or type(exc).__name__} (after {attempt + 1} attempts)"
                    ) from None
                sleep(backoff(attempt))
                attempt += 1
                continue
            except httpx.TimeoutException:  # the service took the request and is slow
                raise RemoteUnreachable(
                    f"{target}: no answer within --timeout {timeout:g} s"
                ) from None
            except httpx.HTTPError as exc:  # a bad URL, a redirect loop, …
                raise RemoteUnreachable(f"{target}: {exc}") from None
            if r.status_code in RETRY_STATUSES and attempt < retries:
                wait = retry_after(r.headers.get("retry-after"))
                sleep(backoff(attempt) if wait is None else wait)
                attempt += 1
                continue
            try:
                body = r.json()
            except ValueError:
                raise RemoteInvalid(f"{target} answered {r.status_code} without JSON") from None
            if not isinstance(body, dict):
                raise RemoteInvalid(
                    f"{target} answered {r.status_code} with JSON that is no object"
                )
            return r.status_code, body


def refusal(status: int, body: dict[str, Any], what: str) -> WaiError:
    """The service's error as a typed error: its code and message as it gave them (never the
    code twice); 5xx and 429 (still, after the retries) are unreachable (3), the rest
    refused (4)."""
    given = body.get("error")
    error: dict[str, Any] = given if isinstance(given, dict) else {}
    code = str(error.get("code") or CliCode.REMOTE_ERROR)
    message = str(error.get("message") or f"the service answered {status} to {what}")
    if status >= 500 or status == 429:
        return RemoteUnreachable(f"{message} (HTTP {status})", code=code)
    return RemoteError(message, code=code)


def decode_remote(
    url: str, envelope_path: Path, token: str | None, *, retries: int = 5, timeout: float = 60.0
) -> dict[str, Any]:
    """The service's answer as :func:`cli.decode.decode_file` shapes a local one."""
    data = read_envelope(envelope_path)
    kind = "application/json" if data.lstrip()[:1] == b"{" else "application/cbor"
    status, body = call(url, "/v1/decode", data, content_type=kind, token=token,
                        retries=retries, timeout=timeout)  # fmt: skip
    if status == 200:
        pic = body["picture"]
        return {
            "envelope": str(envelope_path),
            "decoded": True,
            "reports": body["reports"],
            "undecodable": body.get("undecodable", []),
            "set": body["set"],
            "symbols_digest": body["symbols_digest"],
            "picture": {"width": pic["width"], "height": pic["height"]},
            "rgb_digest": body["rgb_digest"],
            "request_id": body["request_id"],
            "png": base64.b64decode(body["png"]),
        }
    if "reports" in body:  # no path: the reports still came (a negative answer, exit 1)
        return {
            "envelope": str(envelope_path),
            "decoded": False,
            "error": body.get("error") or {},
            "reports": body["reports"],
            "undecodable": body.get("undecodable", []),
            "symbols_digest": body.get("symbols_digest"),
            "request_id": body.get("request_id"),
        }
    raise refusal(status, body, "the decode")


def run_report(args: argparse.Namespace) -> int:
    """``report RUNREPORT --url URL``: post a run report; print the verdict; 0 accepted, 1
    refused."""
    data = read_input(args.run_report, limit=MAX_RUN_REPORT_BYTES, what="run report")
    status, body = call(
        args.url,
        "/v1/run-reports",
        data,
        content_type="application/json",
        token=settings(args).bearer(),
        retries=args.retries,
        timeout=args.timeout,
    )
    if status != 200 or "accepted" not in body:
        raise refusal(status, body, "the run report")
    if args.json:
        print(json.dumps(body, indent=2, ensure_ascii=False))
    else:
        print(_verdict_text(body))
    return EXIT_OK if body["accepted"] else EXIT_NO


def _verdict_text(body: dict[str, Any]) -> str:
    cls = body.get("class") or "(no class)"
    word = "accepted" if body["accepted"] else "refused"
    again = " (submitted before: the same verdict)" if body.get("replayed") else ""
    lines = [f"run report {body.get('run_report')} from {body.get('sink')} [{cls}]: {word}{again}"]
    decodes = body.get("decodes") or []
    for d in decodes:
        for r in d.get("reasons") or []:
            lines.append(f"  decode {d.get('index')}: {r.get('rule')}: {r.get('message')}")
    refused = int(body.get("refused_decodes") or 0)
    lines.append(f"{len(decodes) - refused} of {len(decodes)} decodes accepted")
    return "\n".join(lines)


def post(
    url: str,
    data: bytes,
    *,
    cbor: bool,
    token: str | None,
    retries: int = 5,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[int, dict[str, Any]]:
    """POST an envelope to ``/v1/decode`` (:func:`call`); the final status and JSON body."""
    kind = "application/cbor" if cbor else "application/json"
    return call(url, "/v1/decode", data, content_type=kind, token=token, retries=retries,
                sleep=sleep)  # fmt: skip
