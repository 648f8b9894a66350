"""The report store on SQLite and on PostgreSQL: migrations agree with the models, inserts
are idempotent by report id, filters, cursor paging and the summary's SQL aggregates give
pinned answers; tokens are stored hashed and the first admin token is written 0600."""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

import pytest

from wai_dispatch.service.store import bearer
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.reports import Filters, get_report, list_reports, summary

T0 = 1_796_000_000_000  # a fixed Unix time in ms, 3,200 s into its hour
HOUR = T0 - T0 % 3_600_000


def rec(
    i: int,
    *,
    sink: str = "a",
    ran: str | None = "cpu/onnx-runtime/float",
    refused: tuple[str, ...] = ("dispatch_unit_absent",),
    t: int = 0,
) -> ReportRecord:
    return ReportRecord.from_json(
        {
            "id": f"00000000-0000-0000-0000-{i:012d}",
            "request_id": f"req-{i}",
            "created_ms": T0 + t,
            "sink": sink,
            "role": "primary",
            "capability": "wai.neural.bmshj2018",
            "set_digest": "ab" * 32,
            "symbols_digest": "cd" * 32,
            "rgb_digest": "ef" * 32 if ran else None,
            "needed": "none",
            "path_ran": ran,
            "tier": "none" if ran else None,
            "outcome": "decoded" if ran else "refused",
            "duration_ms": 12.5,
            "placement": {"npu": 0, "gpu": 0, "cpu": 76, "unknown": 0} if ran else {},
            "refusals": [{"path": "npu/model-runtime/float", "code": c} for c in refused],
            "report": {"kind": "wai-neural-dispatch/1", "i": i},
        }
    )


DATA = [
    rec(1, t=0),
    rec(2, t=1000, sink="b"),
    rec(3, t=3_600_000, ran=None, refused=("dispatch_tier_refused", "dispatch_tier_refused")),
    rec(4, t=3_600_500, ran="npu/model-runtime/float", refused=()),
    rec(5, t=7_200_000, sink="b", ran=None, refused=("dispatch_program_absent",)),
]


def test_migrations_agree_with_the_models(store: ReportStore) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from wai_dispatch.service.store.models import Base

    store.migrate()  # a second run is a no-op
    with store.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"include_name": _not_partitioning})
        diff = compare_metadata(ctx, Base.metadata)
    if store.dialect == "postgresql":  # reports partitioned by day (migration 0017)
        assert sorted(_named(d) for d in diff) == sorted(PARTITIONED), diff
    else:
        assert diff == []


#: PostgreSQL's ``reports`` beside the models (SQLite's shape): its unique keys are
#: ``report_keys``' (a partitioned table's must hold the partition key), which the same reads
#: read (migration 0019), and ``report_refusals`` has no foreign key to a partitioned table.
PARTITIONED = [
    ("add_fk", "fk_report_refusals_report_seq_reports"),
    ("add_constraint", "uq_reports_id"),
    ("add_index", "uq_reports_identity"),
]


def _not_partitioning(name: str | None, type_: str, _parent: Any) -> bool:
    """Leave out PostgreSQL's partitions of ``reports`` and ``report_keys`` (tested in
    test_report_partitions.py)."""
    return not (
        type_ == "table"
        and name is not None
        and (name == "report_keys" or re.match(r"^reports_(default|d\d{8})$", name) is not None)
    )


def _named(diff: Any) -> tuple[str, str]:
    kind, obj = diff[0], diff[1]
    name = obj.name
    if kind == "add_constraint" and name is None:  # a column's unique=True: the convention's
        name = f"uq_{obj.table.name}_{next(iter(obj.columns)).name}"
    return kind, str(name)


def test_insert_is_idempotent_by_report_id(store: ReportStore) -> None:
    assert store.insert(DATA) == 5
    assert store.insert(DATA[::-1]) == 0
    assert store.insert([rec(6), *DATA]) == 1
    assert store.count() == 6
    got = get_report(store, DATA[2].id, None)
    assert got["report"] == DATA[2].report and got["path"] is None


def test_filters_and_paging(store: ReportStore) -> None:
    store.insert(DATA)

    def ids(**kw: Any) -> list[int]:
        page = list_reports(store, Filters(**kw), limit=100, cursor=None)
        return [int(x["id"][-3:]) for x in page["items"]]

    assert ids() == [5, 4, 3, 2, 1]
    assert ids(sink="b") == [5, 2]
    assert ids(path="none") == [5, 3]
    assert ids(path="npu/model-runtime/float") == [4]
    assert ids(reason="dispatch_tier_refused") == [3]
    assert ids(reason="dispatch_unit_absent") == [2, 1]
    assert ids(tier="none") == [4, 2, 1]
    assert ids(outcome="refused") == [5, 3]
    assert ids(set="ab" * 32) == [5, 4, 3, 2, 1] and ids(set="00" * 32) == []
    assert ids(capability="wai.neural.int_synth") == []
    assert ids(since_ms=T0 + 1000, until_ms=T0 + 3_600_001) == [3, 2]
    assert ids(request_id="req-4") == [4]
    seen, cursor = [], None
    while True:
        page = list_reports(store, Filters(), limit=2, cursor=cursor)
        seen += [int(x["id"][-3:]) for x in page["items"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert seen == [5, 4, 3, 2, 1]
    counted = list_reports(store, Filters(sink="b"), limit=1, cursor=None, with_total=True)
    assert (len(counted["items"]), counted["total"]) == (1, 2)
    assert "total" not in list_reports(store, Filters(), limit=1, cursor=None)


def test_summary_is_computed_in_the_database(store: ReportStore) -> None:
    store.insert(DATA)
    got = summary(store, Filters(), bucket_s=3600)
    assert got == {
        "reports": 5,
        "by_path": [
            {"path": None, "tier": None, "count": 2},
            {"path": "cpu/onnx-runtime/float", "tier": "none", "count": 2},
            {"path": "npu/model-runtime/float", "tier": "none", "count": 1},
        ],
        "refusals": {
            "dispatch_tier_refused": 2,
            "dispatch_unit_absent": 2,
            "dispatch_program_absent": 1,
        },
        "placement": {"npu": 0.0, "gpu": 0.0, "cpu": 1.0, "unknown": 0.0},
        # per decode that ran a path: report 4 ran on the NPU, though its plan put it on the CPU
        "decoded": 3,
        "decode_share": {"npu": 1 / 3, "gpu": 0.0, "cpu": 2 / 3, "unknown": 0.0},
        "bucket_s": 3600,
        "over_time": [
            {"start_ms": HOUR, "decoded": 2},
            {"start_ms": HOUR + 3_600_000, "decoded": 1, "refused": 1},
            {"start_ms": HOUR + 7_200_000, "refused": 1},
        ],
    }
    assert summary(store, Filters(sink="b"), bucket_s=3600)["reports"] == 2
    tier = summary(store, Filters(reason="dispatch_tier_refused"), bucket_s=60)
    assert (tier["reports"], tier["refusals"]) == (1, {"dispatch_tier_refused": 2})


def test_tokens_hashed_roles_and_first_admin(store: ReportStore, tmp_path: Path) -> None:
    written = bearer.ensure_admin(store, tmp_path)
    assert written == tmp_path / "admin-token"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert bearer.ensure_admin(store, tmp_path) is None  # only on a store without an admin
    secret = bearer.create(store, "edge-1", bearer.Role.sink)
    cache = bearer.TokenCache(store)
    cache.reload()
    assert cache.lookup(secret) == bearer.Principal("edge-1", bearer.Role.sink)
    admin = cache.lookup(written.read_text().strip())
    assert admin is not None and admin.role is bearer.Role.admin
    with store.engine.connect() as conn:
        from sqlalchemy import text

        stored = [r[0] for r in conn.execute(text("SELECT hash FROM tokens"))]
    assert bearer.digest(secret) in stored and secret not in stored
    assert [(r["name"], r["role"], r["revoked"]) for r in bearer.listing(store)] == [
        ("admin", "admin", False),
        ("edge-1", "sink", False),
    ]
    assert bearer.revoke(store, "edge-1") == 1
    cache.reload()
    assert cache.lookup(secret) is None
    with pytest.raises(bearer.TokenError) as err:
        bearer.revoke(store, "edge-1")
    assert err.value.code == "token_not_found"
