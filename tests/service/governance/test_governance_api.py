"""Fleet governance through the service in process (httpx's ASGITransport; SQLite and
PostgreSQL): the policy's versions kept with who and when (admin only), run reports judged by
the version in force when they arrived, every kind of violation refused with its reason, a
compliant run report accepted and stored once, and the governance summary computed in SQL."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _svc import in_process, pg_database

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = json.loads((ROOT / "docs" / "examples" / "run-report.json").read_text())
A, B, C = "a" * 64, "b" * 64, "c" * 64
POLICY = f"""format: wai-model-policy/1
classes:
  kiosk:
    sinks: [sink-a]
    tiers: [none]
    sets:
      - capability: wai.neural.bmshj2018
        digests: [{A}]
  archive:
    sinks: [sink-b]
    tiers: [decode-equivalence]
    sets:
      - digest: {B}
"""


@pytest.fixture(
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)], scope="module"
)
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if request.param == "sqlite":
        with in_process(tmp_path_factory.mktemp("gov")) as running:
            yield running
        return
    admin = request.getfixturevalue("postgres")
    with (
        pg_database(admin) as url,
        in_process(tmp_path_factory.mktemp("gov"), database_url=url) as r,
    ):
        yield r


RAN_NPU = {"unit": "npu", "backend": "model-runtime", "arithmetic": "float"}


def run_report(run_id: str, *decodes: dict[str, Any], sink: str = "sink-a") -> dict[str, Any]:
    return {"format": "wai-run-report/1", "id": run_id, "sink": sink, "decodes": list(decodes)}


def decode(**changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(EXAMPLE["decodes"][0])
    for key, value in changes.items():
        if key == "set_digest":
            out[key] = value
        elif key.startswith("ran_"):
            out["report"]["ran"][key[4:]] = value
        else:
            out["report"][key] = value
    return out


def _sink_reports(live: Any, run_id: str) -> list[dict[str, Any]]:
    with live.client("operator") as c:
        items = c.get("/v1/reports", params={"limit": 500}).json()["items"]
    return [r for r in items if r["run_report"] == run_id]


def test_policy_is_admin_only_and_keeps_its_history(live: Any) -> None:
    with live.client("admin") as admin, live.client("operator") as op:
        assert op.put("/v1/policy", content=POLICY).json()["error"]["code"] == "role_forbidden"
        assert op.get("/v1/policy").status_code == 403
        bad = admin.put("/v1/policy", content=POLICY.replace("tiers: [none]", "tiers: [all]"))
        assert bad.status_code == 422
        assert bad.json()["error"]["code"] == "policy_invalid"
        assert bad.json()["error"]["message"].startswith("policy:5:13: classes.kiosk.tiers[0]: ")
        before = admin.get("/v1/policy/history").json()["versions"]
        first = admin.put("/v1/policy", content=POLICY)
        assert first.status_code == 200, first.text
        v = first.json()
        assert v["set_by"] == "admin" and v["version"] == len(before) + 1
        shown = admin.get("/v1/policy").json()
        assert (shown["version"], shown["text"]) == (v["version"], POLICY)
        history = admin.get("/v1/policy/history").json()["versions"]
        assert [h["version"] for h in history] == list(range(1, v["version"] + 1))
        assert all(h["set_by"] and h["set_ms"] > 0 for h in history)
        assert admin.get("/v1/policy", params={"version": 999}).status_code == 404


def test_a_compliant_run_report_is_accepted_once(live: Any) -> None:
    with live.client("admin") as admin:
        admin.put("/v1/policy", content=POLICY).raise_for_status()
    body = run_report(
        "ok-1", decode(), decode(ran_unit="cpu", ran_backend="onnx-runtime", ran_placement=None)
    )
    with live.client("sink") as sink:
        first = sink.post("/v1/run-reports", json=body)
        assert first.status_code == 200, first.text
        answer = first.json()
        assert (answer["accepted"], answer["replayed"], answer["class"]) == (True, False, "kiosk")
        stored = _sink_reports(live, "ok-1")
        assert len(stored) == 2 and {r["source"] for r in stored} == {"sink"}
        assert {r["path"] for r in stored} == {"npu/model-runtime/float", "cpu/onnx-runtime/float"}
        again = sink.post("/v1/run-reports", json=body).json()
        assert again.pop("replayed") is True
        answer.pop("replayed")
        assert again == answer  # same id, same answer
        assert len(_sink_reports(live, "ok-1")) == 2  # nothing stored twice
        other = sink.post("/v1/run-reports", json={**body, "decodes": body["decodes"][:1]})
        assert (other.status_code, other.json()["error"]["code"]) == (409, "run_report_conflict")
        got = sink.get("/v1/run-reports/ok-1").json()
        assert got["run_report"] == body and got["verdict"]["accepted"] is True


def test_every_violation_is_refused_with_its_reason(live: Any) -> None:
    with live.client("admin") as admin:
        admin.put("/v1/policy", content=POLICY).raise_for_status()
    body = run_report(
        "bad-1",
        decode(),  # compliant: stored
        decode(set_digest=C),  # a set the class may not run
        decode(ran_tier="decode-equivalence"),  # float claims decode-equivalence (and tier)
        decode(refused=[{**RAN_NPU, "reason": "dispatch_unit_absent"}]),  # ran also refused
    )
    with live.client("sink") as sink:
        answer = sink.post("/v1/run-reports", json=body).json()
    assert answer["accepted"] is False and answer["refused_decodes"] == 3
    rules = [[r["rule"] for r in d["reasons"]] for d in answer["decodes"]]
    assert rules == [
        [],
        ["set_not_allowed"],
        ["report_invalid", "float_claims_decode_equivalence", "tier_not_allowed"],
        ["report_invalid"],
    ]
    stored = _sink_reports(live, "bad-1")
    assert len(stored) == 1  # only the compliant decode joins the reports
    with live.client("operator") as op:
        summary = op.get("/v1/run-reports/summary").json()
        latest = summary["latest_refused"][0]
        assert latest["id"] == "bad-1" and latest["class"] == "kiosk"
        assert [(r["index"], r["rule"]) for r in latest["reasons"]] == [
            (1, "set_not_allowed"),
            (2, "report_invalid"),
            (2, "float_claims_decode_equivalence"),
            (2, "tier_not_allowed"),
            (3, "report_invalid"),
        ]
        kiosk = next(c for c in summary["classes"] if c["class"] == "kiosk")
        assert kiosk["runs_refused"] >= 1


def test_judged_by_the_policy_in_force_when_it_arrived(live: Any) -> None:
    with live.client("admin") as admin, live.client("sink") as sink:
        v1 = admin.put("/v1/policy", content=POLICY).json()["version"]
        sink.post("/v1/run-reports", json=run_report("t-1", decode())).raise_for_status()
        v2 = admin.put("/v1/policy", content=POLICY.replace("[sink-a]", "[sink-z]")).json()
        late = sink.post("/v1/run-reports", json=run_report("t-2", decode())).json()
        assert late["policy"]["version"] == v2["version"] == v1 + 1
        assert late["decodes"][0]["reasons"][0]["rule"] == "sink_unclassified"
        early = sink.get("/v1/run-reports/t-1").json()["verdict"]
        assert (early["policy"]["version"], early["accepted"]) == (v1, True)
        # a resubmission is the stored answer, not a new judgement under v2
        replay = sink.post("/v1/run-reports", json=run_report("t-1", decode())).json()
        assert (replay["policy"]["version"], replay["accepted"]) == (v1, True)
        admin.put("/v1/policy", content=POLICY).raise_for_status()


def test_run_report_errors_and_roles(live: Any) -> None:
    with live.client("sink") as sink, live.client(None) as anon:
        assert anon.post("/v1/run-reports", json={}).status_code == 401
        json_type = {"Content-Type": "application/json"}
        bad = sink.post("/v1/run-reports", content=b"{", headers=json_type)
        assert (bad.status_code, bad.json()["error"]["code"]) == (422, "run_report_malformed")
        theirs = sink.post("/v1/run-reports", json=run_report("x-1", decode(), sink="sink-b"))
        assert theirs.json()["error"]["code"] == "run_report_sink_mismatch"
        assert theirs.status_code == 403
        assert sink.get("/v1/run-reports/summary").status_code == 403
        assert sink.get("/v1/run-reports/nope").status_code == 404


def test_sink_class_filters_the_reports_summary(live: Any) -> None:
    with live.client("admin") as admin, live.client("sink") as sink:
        admin.put("/v1/policy", content=POLICY).raise_for_status()
        sink.post("/v1/run-reports", json=run_report("c-1", decode())).raise_for_status()
    with live.client("operator") as op:
        everything = op.get("/v1/reports/summary").json()["reports"]
        kiosk = op.get("/v1/reports/summary", params={"sink_class": "kiosk"}).json()["reports"]
        archive = op.get("/v1/reports/summary", params={"sink_class": "archive"}).json()
        nothing = op.get("/v1/reports/summary", params={"sink_class": "nope"}).json()
    assert 0 < kiosk <= everything
    assert archive["reports"] == 0 and nothing["reports"] == 0


def test_the_dashboard_is_served_with_a_strict_policy(live: Any) -> None:
    with live.client(None, follow_redirects=True) as anon:
        page = anon.get("/dashboard")
        assert page.status_code == 200 and "<title>wai-dispatch" in page.text
        assert "connect-src 'self'" in page.headers["content-security-policy"]
        assert anon.get("/dashboard/vendor/uPlot.iife.min.js").status_code == 200
        assert anon.get("/dashboard/../pyproject.toml").status_code == 404


def test_run_report_ids_are_per_sink(live: Any) -> None:
    """Sink B may use an id sink A used: no 409, nothing about A, both kept apart."""
    with (
        live.client("admin") as admin,
        live.client("sink") as a,
        live.client("sink-b") as b,
        live.client("operator") as op,
    ):
        admin.put("/v1/policy", content=POLICY).raise_for_status()
        first = a.post("/v1/run-reports", json=run_report("shared-id", decode()))
        assert first.status_code == 200, first.text
        mine = b.post("/v1/run-reports", json=run_report("shared-id", decode(), sink="sink-b"))
        assert mine.status_code == 200, mine.text
        assert mine.json()["replayed"] is False
        assert "sink-a" not in mine.text
        got = b.get("/v1/run-reports/shared-id").json()
        assert got["run_report"]["sink"] == "sink-b"
        assert a.get("/v1/run-reports/shared-id").json()["run_report"]["sink"] == "sink-a"
        theirs = op.get("/v1/run-reports/shared-id", params={"sink": "sink-a"}).json()
        assert theirs["run_report"]["sink"] == "sink-a"


@pytest.mark.parametrize(
    "body",
    [
        json.dumps(run_report("enc-1", decode())).encode("utf-16"),
        json.dumps(run_report("enc-2", decode())).encode("utf-32"),
        json.dumps(run_report("enc-3", decode())).replace("sink-a", "sink-\\ud800").encode(),
        b"[" * 100_000 + b"]" * 100_000,
        b'{"format": "wai-run-report/1", "id": "x", "sink": "sink-a", "decodes": ['
        + b"1" * 5000
        + b"]}",
    ],
    ids=["utf-16", "utf-32", "surrogate", "100k-deep", "5000-digits"],
)
def test_a_hostile_run_report_body_is_a_typed_4xx(live: Any, body: bytes) -> None:
    with live.client("sink") as sink:
        r = sink.post("/v1/run-reports", content=body, headers={"Content-Type": "application/json"})
    assert (r.status_code, r.json()["error"]["code"]) == (422, "run_report_malformed"), r.text


def test_a_placement_count_past_the_column_is_refused_not_stored(live: Any) -> None:
    """10^19 operations on a unit (20 digits, past int64): the decode is refused as a report
    that does not read (never an integer overflow in the store)."""
    huge = {"npu": 10**19, "gpu": 0, "cpu": 0, "unknown": 0}
    with live.client("admin") as admin, live.client("sink") as sink:
        admin.put("/v1/policy", content=POLICY).raise_for_status()
        r = sink.post(
            "/v1/run-reports", json=run_report("huge-placement", decode(ran_placement=huge))
        )
    assert r.status_code == 200, r.text
    verdict = r.json()
    assert verdict["accepted"] is False
    assert "placement.npu is over 2147483647" in json.dumps(verdict)
    assert _sink_reports(live, "huge-placement") == []


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("format: wai-model-policy/1\nclasses: " + "1" * 5000 + "\n", "5000 digits"),
        ("a: " + "{b: " * 1000 + "1" + "}" * 1000 + "\n", "nested deeper than 64"),
        ("a: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested deeper than 64"),
        ("format: !!python/object:os.system wai-model-policy/1\n", "is not allowed"),
        ("a: [" + ",".join(["1"] * 100_001) + "]\n", "more than 100000 values"),
    ],
    ids=["5000-digits", "1000-mappings", "20000-sequences", "tag", "100001-values"],
)
def test_a_hostile_policy_is_a_typed_4xx(live: Any, text: str, says: str) -> None:
    with live.client("admin") as admin:
        r = admin.put("/v1/policy", content=text)
    assert (r.status_code, r.json()["error"]["code"]) == (422, "policy_malformed"), r.text
    assert says in r.json()["error"]["message"]
