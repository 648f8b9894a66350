"""The HTTP API in process (httpx's ASGITransport, the app's lifespan run; SQLite store): decodes
equal the CLI's, every bad-input class answers its 4xx and stable code, and every report is
stored once and found by each filter."""

from __future__ import annotations

import argparse
import base64
import io
import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import blake3
import numpy as np
import pytest
from _svc import REPLICATE, SAMPLE_CBOR, SAMPLE_JSON, InProcess, envelope_of_latent, in_process
from fastapi.responses import JSONResponse
from PIL import Image

from wai_dispatch.service.http.openapi import Decoded

MAX_BODY = 256 * 1024


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with in_process(tmp_path_factory.mktemp("svc"), max_body_bytes=MAX_BODY) as running:
        yield running


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """What `wai-dispatch decode` gives for each sample (same code path, its own store)."""
    from wai_dispatch.cli.context import decoder
    from wai_dispatch.cli.decode import decode_file

    args = argparse.Namespace(offer=None, data_dir=str(tmp_path_factory.mktemp("cli")))
    ctx = decoder(args)
    return {p.name: decode_file(ctx, p) for p in (SAMPLE_JSON, SAMPLE_CBOR, REPLICATE)}


def _post(live: InProcess, path: Path, role: str = "sink", **kw: Any) -> Any:
    ctype = "application/cbor" if path.suffix == ".cbor" else "application/json"
    with live.client(role) as c:
        return c.post(
            "/v1/decode", content=path.read_bytes(), headers={"Content-Type": ctype}, **kw
        )


@pytest.mark.parametrize("sample", [SAMPLE_JSON, SAMPLE_CBOR], ids=["json", "cbor"])
def test_decode_equals_the_cli(live: InProcess, cli_results: dict[str, Any], sample: Path) -> None:
    r = _post(live, sample)
    assert r.status_code == 200, r.text
    body = r.json()
    want = cli_results[sample.name]
    png = base64.b64decode(body["png"])
    assert png == want["png"]
    assert body["reports"] == want["reports"]
    assert body["set"] == want["set"]
    assert body["symbols_digest"] == want["symbols_digest"]
    assert body["picture"] == {"width": 256, "height": 256, "format": "png"}
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    assert body["rgb_digest"] == blake3.blake3(rgb.tobytes()).hexdigest()
    assert body["request_id"] == r.headers["x-request-id"]
    assert len(body["report_ids"]) == 1
    # written out by the route (the base64 spliced in as bytes), it is byte for byte what
    # FastAPI makes of the documented model: every field, in the model's order
    assert r.headers["content-type"] == "application/json"
    assert r.content == JSONResponse(Decoded.model_validate_json(r.content).model_dump()).body


def test_decode_raw_png_carries_reports_in_headers(
    live: InProcess, cli_results: dict[str, Any]
) -> None:
    with live.client() as c:
        r = c.post(
            "/v1/decode",
            content=SAMPLE_JSON.read_bytes(),
            headers={"Content-Type": "application/json", "Accept": "image/png"},
        )
    assert r.status_code == 200
    assert r.headers["content-type"] == "image/png"
    want = cli_results[SAMPLE_JSON.name]
    assert r.content == want["png"]
    assert json.loads(r.headers["x-wai-reports"]) == want["reports"]
    assert r.headers["x-wai-symbols-digest"] == want["symbols_digest"]
    assert r.headers["x-wai-picture"] == "256x256"


def test_decode_raw_rgb8_is_the_samples_the_digest_names(
    live: InProcess, cli_results: dict[str, Any]
) -> None:
    """``Accept: application/octet-stream``: the RGB8 samples themselves, row by row (no PNG
    made), the reports in headers; the first of the route's types named wins."""
    with live.client() as c:
        r = c.post(
            "/v1/decode",
            content=SAMPLE_JSON.read_bytes(),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/octet-stream, application/json",
            },
        )
        png_first = c.post(
            "/v1/decode",
            content=SAMPLE_JSON.read_bytes(),
            headers={
                "Content-Type": "application/json",
                "Accept": "image/png, application/octet-stream",
            },
        )
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/octet-stream"
    want = cli_results[SAMPLE_JSON.name]
    assert len(r.content) == 256 * 256 * 3
    assert blake3.blake3(r.content).hexdigest() == r.headers["x-wai-rgb-digest"]
    rgb = np.asarray(Image.open(io.BytesIO(want["png"])).convert("RGB"))
    assert r.content == rgb.tobytes()
    assert (r.headers["x-wai-picture"], r.headers["x-wai-format"]) == ("256x256", "rgb8")
    assert json.loads(r.headers["x-wai-reports"]) == want["reports"]
    assert png_first.headers["content-type"] == "image/png"


def test_no_path_is_422_with_reports_and_symbols(
    live: InProcess, cli_results: dict[str, Any]
) -> None:
    r = _post(live, REPLICATE)
    assert r.status_code == 422
    body = r.json()
    want = cli_results[REPLICATE.name]
    assert body["error"]["code"] == "decode_no_path"
    assert body["reports"] == want["reports"]
    assert body["symbols_digest"] == want["symbols_digest"]
    assert [x["reason"] for x in body["reports"][0]["refused"]] == [
        "dispatch_tier_refused",
        "dispatch_tier_refused",
        "dispatch_arithmetic_mismatch",
    ]


def _sample(**change: Any) -> bytes:
    obj = json.loads(SAMPLE_JSON.read_bytes())
    obj.update(change)
    return json.dumps(obj).encode()


def _other_capability_set(root: Path) -> Path:
    """A tiny installed-able set of wai.neural.int_synth (for the wrong-capability case)."""
    from wai_dispatch.codec.sets import write_manifest

    folder = root / "int-set"
    folder.mkdir(exist_ok=True)
    (folder / "notes.txt").write_text("a set of another capability\n")
    (folder / "wai-usage.json").write_text("{}\n")
    write_manifest(folder, name="other", capability="wai.neural.int_synth", version="1", facts={})
    return folder


@pytest.fixture(scope="module")
def other_set(live: InProcess, tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = _other_capability_set(tmp_path_factory.mktemp("other"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname="other")
    with live.client("admin") as c:
        r = c.post("/v1/sets", content=buf.getvalue(), headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    return str(r.json()["digest"])


BAD = [
    ("malformed-json", b"{not json", "application/json", "sink", 400, "envelope_malformed"),
    ("malformed-cbor", b"\xff\x00\x01", "application/cbor", "sink", 400, "envelope_malformed"),
    ("bad-base64", _sample(payload="!!!"), "application/json", "sink", 422, "envelope_invalid"),
    ("unknown-field", _sample(colour="red"), "application/json", "sink", 422,
     "envelope_unknown_field"),
    ("unknown-capability", _sample(capability="wai.neural.nope"), "application/json", "sink",
     422, "unknown_capability"),
    ("unknown-set", _sample(set="0" * 64), "application/json", "sink", 404, "set_not_installed"),
    ("oversize-body", b" " * (MAX_BODY + 1), "application/json", "sink", 413, "body_too_large"),
    ("content-type", b"x", "text/plain", "sink", 415, "content_type_unsupported"),
    ("no-token", SAMPLE_JSON.read_bytes(), "application/json", None, 401, "token_missing"),
    ("wrong-token", SAMPLE_JSON.read_bytes(), "application/json", "bogus", 401, "token_unknown"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "body", "ctype", "role", "status", "code"), BAD, ids=[b[0] for b in BAD]
)
def test_bad_input_answers_its_code(
    live: InProcess, name: str, body: bytes, ctype: str, role: str | None, status: int, code: str
) -> None:
    headers = {"Content-Type": ctype}
    if role == "bogus":
        headers["Authorization"] = "Bearer wai_not-a-token"
        role = None
    with live.client(role) as c:
        r = c.post("/v1/decode", content=body, headers=headers)
    assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
    if status == 401:
        assert r.headers["www-authenticate"] == "Bearer"


def test_set_of_another_capability_is_refused(live: InProcess, other_set: str) -> None:
    with live.client() as c:
        r = c.post(
            "/v1/decode",
            content=_sample(set=other_set),
            headers={"Content-Type": "application/json"},
        )
    assert (r.status_code, r.json()["error"]["code"]) == (422, "set_capability_mismatch")


def test_oversize_latent_is_refused_from_the_header(
    live: InProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the default limit takes 4096×4096 (tiled synthesis); a service may set a lower one
    monkeypatch.setattr(live.service.admission, "max_latent_elements", 192 * 64 * 64)
    body = envelope_of_latent(tmp_path / "sets", 80, 80)  # 192×80×80 > 192×64×64
    with live.client() as c:
        r = c.post("/v1/decode", content=body, headers={"Content-Type": "application/json"})
    assert (r.status_code, r.json()["error"]["code"]) == (413, "latent_over_limit")
    assert "max_latent_elements" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    ("method", "path"), [("POST", "/v1/sets"), ("DELETE", "/v1/sets/" + "0" * 64)]
)
def test_wrong_role_is_403(live: InProcess, method: str, path: str) -> None:
    for role in ("sink", "operator"):
        with live.client(role) as c:
            r = c.request(method, path, content=b"x", headers={"Content-Type": "application/gzip"})
        assert (r.status_code, r.json()["error"]["code"]) == (403, "role_forbidden")


def test_sets_and_paths(live: InProcess, other_set: str) -> None:
    with live.client() as c:
        sets = c.get("/v1/sets").json()["sets"]
        assert {s["capability"] for s in sets} == {
            "wai.neural.bmshj2018",
            "wai.neural.bmshj2018_hyperprior",
            "wai.neural.int_synth",
        }
        one = c.get(f"/v1/sets/{other_set}").json()
        assert one["digest"] == other_set and one["facts"] == {}
        assert c.get("/v1/sets/" + "1" * 64).json()["error"]["code"] == "set_not_installed"
        paths = c.get("/v1/paths").json()["paths"]
    assert [p["path"]["backend"] for p in paths] == ["model-runtime", "onnx-runtime", "wai-ops"]
    assert [p["present"] for p in paths] == [False, True, True]  # the interpreter is here
    assert all(p["reason"] for p in paths if not p["present"])


def test_admin_removes_a_set(live: InProcess, tmp_path: Path) -> None:
    from wai_dispatch.codec.sets import write_manifest

    folder = tmp_path / "gone"
    folder.mkdir()
    (folder / "a.txt").write_text("to remove\n")
    (folder / "wai-usage.json").write_text("{}\n")
    digest = write_manifest(
        folder, name="gone", capability="wai.neural.int_synth", version="1", facts={}
    ).digest
    assert live.service.sets.install(folder) == digest  # into the cache and the registry
    with live.client("admin") as c:
        assert c.delete(f"/v1/sets/{digest}").json() == {"removed": digest}
        r = c.delete(f"/v1/sets/{digest}")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "set_not_installed")
    assert digest not in {s.digest for s in live.service.decoder.set_store.list()}
    gone = {e.digest: e for e in live.service.sets.registry.entries()}[digest]
    assert gone.removed_ms is not None  # its tombstone


def _all(c: Any, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = c.get(
            "/v1/reports", params={**params, "limit": 2, **({"cursor": cursor} if cursor else {})}
        )
        assert page.status_code == 200, page.text
        items += page.json()["items"]
        cursor = page.json()["next"]
        if cursor is None:
            return items


def test_every_report_is_stored_once_and_found_by_each_filter(live: InProcess) -> None:
    decoded = [_post(live, SAMPLE_JSON).json(), _post(live, SAMPLE_CBOR, role="sink-b").json()]
    refused = _post(live, REPLICATE).json()
    ids = [d["report_ids"][0] for d in decoded] + refused["report_ids"]
    with live.client("operator") as c:
        everything = _all(c)
        got = {r["id"]: r for r in everything}
        assert len(got) == len(everything)  # no report twice
        assert set(ids) <= set(got)
        a, b, r = got[ids[0]], got[ids[1]], got[ids[2]]
        assert (a["sink"], b["sink"], r["sink"]) == ("sink-a", "sink-b", "sink-a")
        assert a["report"] == decoded[0]["reports"][0]
        assert a["rgb_digest"] == decoded[0]["rgb_digest"] and r["rgb_digest"] is None
        assert a["request_id"] == decoded[0]["request_id"]
        assert r["symbols_digest"] == refused["symbols_digest"]

        def found(**params: Any) -> set[str]:
            return {x["id"] for x in _all(c, **params)}

        assert ids[2] in found(reason="dispatch_tier_refused")
        assert ids[0] not in found(reason="dispatch_tier_refused")
        assert ids[0] in found(reason="dispatch_unit_absent")
        assert {ids[0], ids[1]} <= found(path="cpu/onnx-runtime/float")
        assert ids[2] in found(path="none") and ids[0] not in found(path="none")
        assert ids[0] in found(tier="none") and ids[2] not in found(tier="none")
        assert ids[1] in found(sink="sink-b") and ids[0] not in found(sink="sink-b")
        assert ids[0] in found(set=a["set"]) and not found(set="f" * 64)
        assert set(ids) <= found(capability="wai.neural.bmshj2018")
        assert not found(capability="wai.neural.int_synth")
        assert ids[2] in found(outcome="refused") and ids[0] not in found(outcome="refused")
        assert ids[0] in found(request_id=a["request_id"])
        t = a["time_ms"]
        assert ids[0] in found(since_ms=t, until_ms=t + 1)
        assert ids[0] not in found(since_ms=t + 1) and ids[0] not in found(until_ms=t)
        one = c.get(f"/v1/reports/{ids[0]}").json()
        assert one == a
        summary = c.get("/v1/reports/summary", params={"sink": "sink-a"}).json()
    sink_a = [x for x in everything if x["sink"] == "sink-a"]
    assert summary["reports"] == len(sink_a)
    codes = [f["reason"] for x in sink_a for f in x["report"]["refused"]]
    assert summary["refusals"] == {code: codes.count(code) for code in set(codes)}
    assert sum(p["count"] for p in summary["by_path"]) == len(sink_a)
    assert summary["placement"]["cpu"] == 1.0
    assert sum(b.get("decoded", 0) + b.get("refused", 0) for b in summary["over_time"]) == len(
        sink_a
    )
    # A sink sees only its own reports.
    with live.client("sink-b") as c:
        mine = _all(c)
        assert {x["sink"] for x in mine} == {"sink-b"}
        assert {x["id"] for x in _all(c, sink="sink-a")} == {x["id"] for x in mine}
        assert c.get(f"/v1/reports/{ids[0]}").json()["error"]["code"] == "report_not_found"
        assert c.get("/v1/reports/summary").json()["reports"] == len(mine)
        bad = c.get("/v1/reports", params={"cursor": "not-a-cursor"})
        assert (bad.status_code, bad.json()["error"]["code"]) == (422, "cursor_invalid")


def test_operations_routes(live: InProcess) -> None:
    _post(live, SAMPLE_JSON)
    with live.client(None) as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        ready = c.get("/readyz")
        assert ready.status_code == 200 and ready.json()["store"] == "up"
        text = c.get("/metrics").text
        assert (
            'wai_decodes_total{outcome="decoded",path="cpu/onnx-runtime/float",tier="none"}' in text
        )
        assert "wai_refusals_total{code=" in text and "wai_spool_bytes 0.0" in text
        assert "wai_program_cache_hits" in text
        # the roll-ups' lag: the reports not yet folded in (a gauge each: depth and age)
        depth = float(re.findall(r"^wai_rollup_inbox_reports (\S+)$", text, re.M)[0])
        age = float(re.findall(r"^wai_rollup_inbox_oldest_seconds (\S+)$", text, re.M)[0])
        assert depth >= 0 and age >= 0
        # the seconds per pixel the sample's decode calibrated (bounded: 0.25×–8× 1.7 µs) and
        # the memory admission counts against the budget
        spp = float(re.findall(r"^wai_decode_seconds_per_pixel (\S+)$", text, re.M)[0])
        assert 0.25 * 1.7e-6 <= spp <= 8 * 1.7e-6
        assert re.search(r"^wai_memory_held_bytes \d", text, re.M)
        # bound to the decoder's program cache, which its adapters fill
        cache = dict(re.findall(r"^wai_program_cache_(misses_total|bytes) (\S+)$", text, re.M))
        assert float(cache["misses_total"]) >= 1 and float(cache["bytes"]) > 0
        nf = c.get("/v1/nothing")
        assert (nf.status_code, nf.json()["error"]["code"]) == (404, "not_found")


def test_fallback_decodes_when_the_primary_has_no_path(live: InProcess) -> None:
    """The primary (wai.neural.int_synth, its set not installed) has no path; the fallback
    decodes: two reports, primary first, both stored, filed as primary and fallback."""
    sample = json.loads(SAMPLE_JSON.read_bytes())
    envelope = {
        "format": "wai-envelope/1",
        "capability": "wai.neural.int_synth",
        "payload": sample["payload"],
        "set": "0" * 64,
        "fallback": {
            "capability": sample["capability"],
            "payload": sample["payload"],
            "set": sample["set"],
        },
    }
    with live.client() as c:
        r = c.post("/v1/decode", json=envelope)
        assert r.status_code == 200, r.text
        body = r.json()
        assert [x["capability"] for x in body["reports"]] == [
            "wai.neural.int_synth",
            "wai.neural.bmshj2018",
        ]
        assert body["reports"][0]["ran"] is None and body["reports"][1]["ran"] is not None
        stored = [c.get(f"/v1/reports/{i}").json() for i in body["report_ids"]]
    assert [(s["role"], s["outcome"]) for s in stored] == [
        ("primary", "refused"),
        ("fallback", "decoded"),
    ]
    assert stored[1]["rgb_digest"] == body["rgb_digest"] and stored[0]["rgb_digest"] is None
    assert {s["request_id"] for s in stored} == {body["request_id"]}
