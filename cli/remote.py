"""The sink's client of the service: ``decode --url`` posts an envelope, ``report --url`` a run
report (docs/cli.md#the-sinks-client). Nothing local is opened; calls are retried with backoff
(:mod:`cli.retry`), ``--timeout`` bounds each attempt.

Standard library only, so that a sink posting once a minute pays about one interpreter start-up
(tests/cli/test_cli_remote.py holds the modules it loads); so its errors are not
:class:`dispatch.WaiError` but :class:`ClientError`, with codes of the registry: no usable answer
is :class:`RemoteUnreachable` (3), an error the service answered :class:`RemoteError` (4), a
local file that cannot be read or written a usage error (2)."""

from __future__ import annotations

import argparse
import binascii
import json
import os
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

from wai_dispatch.cli import http_client
from wai_dispatch.cli.client_settings import ClientSettingsInvalid, bearer
from wai_dispatch.cli.flags import (
    EXIT_INTERRUPTED,
    EXIT_NO,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    is_stdio,
)
from wai_dispatch.cli.outcome_text import print_outcomes
from wai_dispatch.cli.retry import RETRY_STATUSES, backoff, retry_after

#: A run report's JSON is at most this (the service's limit, docs/run-reports.md).
MAX_RUN_REPORT_BYTES = 16 * 1024 * 1024
#: An envelope is at most this: ``setfacts.limits.Limits.max_envelope_bytes`` (a test holds them
#: equal), refused here before it is sent.
MAX_ENVELOPE_BYTES = 96 * 1024 * 1024

# typing, random, datetime and base64 are left out on purpose: ~8 ms of the start-up
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeAlias

    Send: TypeAlias = Callable[..., http_client.Answer]


class ClientError(Exception):
    """A remote command's typed error: a registry ``code``, a message, an exit status."""

    code: str
    exit_status = EXIT_USAGE

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class RemoteError(ClientError):
    """the service refused a decode --url or report --url without a more specific code (exit 4;
    a refusal with the service's own code keeps that code)"""

    code = "remote_error"
    exit_status = EXIT_REFUSED


class RemoteUnreachable(ClientError):
    """decode --url or report --url could not reach the service, or it stayed busy after the
    retries (exit 3)"""

    code = "remote_unreachable"
    exit_status = EXIT_UNREACHABLE


class RemoteInvalid(RemoteUnreachable):
    """the service answered decode --url or report --url without JSON (exit 3)"""

    code = "remote_invalid"


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
    send: Send = http_client.post,
) -> tuple[int, dict[str, Any]]:
    """POST ``data`` to ``url`` + ``route`` (through ``send``, :func:`cli.http_client.post`);
    the final status and JSON body. Retries (at most ``retries``) a connection that failed or
    dropped before an answer, and 429/502/503/504. Raises :class:`RemoteUnreachable` when no
    answer came, and :class:`RemoteInvalid` for an answer without JSON."""
    headers = {"Content-Type": content_type, "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    target = url.rstrip("/") + route
    attempt = 0
    while True:
        try:
            r = send(target, data, headers, timeout=timeout)
        except http_client.NotConnected as exc:
            if attempt >= retries:
                raise RemoteUnreachable(f"{target}: {exc} (after {attempt + 1} attempts)") from None
            sleep(backoff(attempt))
            attempt += 1
            continue
        except http_client.NoAnswer as exc:  # the service took the request and is slow
            raise RemoteUnreachable(f"{target}: {exc} (--timeout {timeout:g} s)") from None
        if r.status in RETRY_STATUSES and attempt < retries:
            wait = retry_after(r.headers.get("retry-after"))
            sleep(backoff(attempt) if wait is None else wait)
            attempt += 1
            continue
        try:
            body = json.loads(r.body)
        except (ValueError, UnicodeDecodeError):
            raise RemoteInvalid(f"{target} answered {r.status} without JSON") from None
        if not isinstance(body, dict):
            raise RemoteInvalid(f"{target} answered {r.status} with JSON that is no object")
        return r.status, body


def refusal(status: int, body: dict[str, Any], what: str) -> ClientError:
    """The service's error as a typed error: its code and message as it gave them (never the
    code twice); 5xx and 429 (still, after the retries) are unreachable (3), the rest
    refused (4)."""
    given = body.get("error")
    error: dict[str, Any] = given if isinstance(given, dict) else {}
    code = str(error.get("code") or RemoteError.code)
    message = str(error.get("message") or f"the service answered {status} to {what}")
    if status >= 500 or status == 429:
        return RemoteUnreachable(f"{message} (HTTP {status})", code=code)
    return RemoteError(message, code=code)


# --- the local files: the envelope or run report read, the PNG written ---------------------


def read_input(path: Path, *, limit: int, what: str, too_large: str) -> bytes:
    """The bytes of ``path`` (``-``: standard input), a regular file of at most ``limit``."""
    if is_stdio(path):
        data = sys.stdin.buffer.read(limit + 1)
        where = f"{what} on standard input"
    else:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise ClientError(
                f"cannot read {what} {path}: {exc.strerror}", code="file_unreadable"
            ) from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ClientError(f"{what} {path} is not a regular file", code="file_not_regular")
            data = f.read(limit + 1)
        where = f"{what} {path}"
    if len(data) > limit:
        raise ClientError(f"{where}: over the limit of {limit} bytes", code=too_large)
    return data


def check_target(path: Path, *, source: Path) -> None:
    """Refuse, before anything is sent, an output that cannot be written or is the input."""
    if is_stdio(path):
        return
    if path.is_dir():
        raise ClientError(f"cannot write {path}: it is a folder", code="file_unwritable")
    if not path.parent.is_dir():
        raise ClientError(
            f"cannot write {path}: the folder {path.parent} does not exist", code="file_unwritable"
        )
    if not is_stdio(source) and path.exists() and path.samefile(source):
        raise ClientError(
            f"the output {path} is the input {source}: refused", code="output_is_input"
        )


def write_output(path: Path, data: bytes) -> None:
    """``data`` to ``path`` whole or not at all (a temporary file beside it, renamed), or to
    standard output for ``-``."""
    if is_stdio(path):
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(temporary, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise ClientError(
            f"cannot write {path}: {exc.strerror or exc}", code="file_unwritable"
        ) from None


# --- the commands ----------------------------------------------------------------------------


def _token(args: argparse.Namespace) -> str | None:
    try:
        return bearer(getattr(args, "token", None), getattr(args, "token_file", None))
    except ClientSettingsInvalid as exc:
        raise ClientError(str(exc), code="settings_invalid") from None


def decode_remote(
    url: str, envelope_path: Path, token: str | None, *, retries: int = 5, timeout: float = 60.0
) -> dict[str, Any]:
    """The service's answer, shaped as :func:`cli.decode.decode_file` shapes a local one."""
    data = read_input(
        envelope_path, limit=MAX_ENVELOPE_BYTES, what="envelope", too_large="envelope_too_large"
    )
    kind = "application/json" if data.lstrip()[:1] == b"{" else "application/cbor"
    status, body = call(
        url, "/v1/decode", data, content_type=kind, token=token, retries=retries, timeout=timeout
    )
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
            "png": binascii.a2b_base64(body["png"]),
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


def run_decode(args: argparse.Namespace) -> int:
    """``decode ENVELOPE --url URL``: the service decodes; the reports print as it gave them
    (its codes, without this machine's words for them)."""
    if args.output is not None:  # refused before the call: nothing is sent for nothing
        check_target(args.output, source=args.envelope)
    outcome = decode_remote(
        args.url, args.envelope, _token(args), retries=args.retries, timeout=args.timeout
    )
    png = outcome.pop("png", None)
    if png is not None and args.output is not None:
        write_output(args.output, png)
        outcome["output"] = "(standard output)" if is_stdio(args.output) else str(args.output)
    out = sys.stderr if is_stdio(args.output) else sys.stdout
    print_outcomes([outcome], as_json=args.json, out=out)
    return EXIT_OK if outcome["decoded"] else EXIT_NO


def run_report(args: argparse.Namespace) -> int:
    """``report RUNREPORT --url URL``: post a run report; print the verdict; 0 accepted, 1
    refused."""
    data = read_input(
        args.run_report, limit=MAX_RUN_REPORT_BYTES, what="run report", too_large="file_too_large"
    )
    status, body = call(
        args.url,
        "/v1/run-reports",
        data,
        content_type="application/json",
        token=_token(args),
        retries=args.retries,
        timeout=args.timeout,
    )
    if status != 200 or "accepted" not in body:
        raise refusal(status, body, "the run report")
    if args.json:
        print(json.dumps(body, indent=2, ensure_ascii=False))
    else:
        print(verdict_text(body))
    return EXIT_OK if body["accepted"] else EXIT_NO


def verdict_text(body: dict[str, Any]) -> str:
    """A verdict's JSON (the service's answer, or ``policy check``'s own) as lines."""
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


def execute(args: argparse.Namespace, run: Callable[[argparse.Namespace], int]) -> int:
    """``run(args)``; a :class:`ClientError` as one line on stderr (``--json``: its JSON) with
    its exit status, as :func:`cli.run.execute` does for the local commands."""
    try:
        return run(args)
    except ClientError as exc:
        return report(exc, as_json=bool(getattr(args, "json", False)))
    except BrokenPipeError:  # `wai-dispatch … | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:  # a token file that does not read, say
        where = f": {exc.filename}" if exc.filename else ""
        error = ClientError(f"{exc.strerror or exc}{where}", code="io_failed")
        return report(error, as_json=bool(getattr(args, "json", False)))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def report(exc: ClientError, *, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"error": exc.to_json()}), file=sys.stderr)
    else:
        message = " ".join(exc.message.split())
        print(f"wai-dispatch: error: {exc.code}: {message}", file=sys.stderr)
    return exc.exit_status
