"""``wai-dispatch decode --url URL``: post the envelope to a running service instead of
decoding here (the fleet sink's side). A 429 is retried after its ``Retry-After`` (at most
``--retries`` times); the answer prints as a local decode's does."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

from wai_dispatch.cli.context import read_envelope
from wai_dispatch.dispatch.codes import ErrorCode
from wai_dispatch.dispatch.errors import WaiError


class RemoteError(WaiError):
    code = ErrorCode.REMOTE_ERROR


def post(
    url: str,
    data: bytes,
    *,
    cbor: bool,
    token: str | None,
    retries: int = 5,
    sleep: Any = time.sleep,
) -> tuple[int, dict[str, Any]]:
    """POST the envelope; the final status and JSON body. Retries 429 after Retry-After."""
    import httpx

    headers = {"Content-Type": "application/cbor" if cbor else "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    target = url.rstrip("/") + "/v1/decode"
    with httpx.Client(timeout=120) as client:
        for attempt in range(retries + 1):
            try:
                r = client.post(target, content=data, headers=headers)
            except httpx.HTTPError as exc:
                raise RemoteError(f"{target}: {exc}", code=ErrorCode.REMOTE_UNREACHABLE) from None
            if r.status_code == 429 and attempt < retries:
                wait = r.headers.get("retry-after", "1")
                sleep(float(wait) if wait.replace(".", "", 1).isdigit() else 1.0)
                continue
            try:
                body: dict[str, Any] = r.json()
            except ValueError:
                raise RemoteError(
                    f"{target} answered {r.status_code} without JSON", code=ErrorCode.REMOTE_INVALID
                ) from None
            return r.status_code, body
    raise AssertionError("unreachable")


def decode_remote(
    url: str, envelope_path: Path, token: str | None, retries: int = 5
) -> dict[str, Any]:
    """The service's answer as :func:`cli.decode.decode_file` shapes a local one."""

    data = read_envelope(envelope_path)
    status, body = post(url, data, cbor=data.lstrip()[:1] != b"{", token=token, retries=retries)
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
    error = body.get("error") or {}
    if "reports" in body:  # no path: the reports still came
        return {
            "envelope": str(envelope_path),
            "decoded": False,
            "error": error,
            "reports": body["reports"],
            "undecodable": body.get("undecodable", []),
            "symbols_digest": body.get("symbols_digest"),
            "request_id": body.get("request_id"),
        }
    raise RemoteError(
        f"{error.get('code', status)}: {error.get('message', 'the service refused the decode')}",
        code=str(error.get("code") or "remote_error"),
    )
