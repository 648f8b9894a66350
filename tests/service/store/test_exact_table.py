"""The exact tier's table, on SQLite and PostgreSQL: the window's integer decodes grouped by set
and symbols digest, their distinct RGB digests pinned, a seeded disagreement first and flagged,
a sink's decode counted with its RGB unknown, float decodes and refusals left out, paged by
keyset (every row once), the "disagree" filter, and a cursor of another list refused; the
statement reads ``ix_reports_exact`` (its plan, on each store)."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import text

from wai_dispatch.service.store.errors import CursorInvalid
from wai_dispatch.service.store.fleet import exact_groups, exact_table
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.reports import Filters

T0 = 1_796_000_000_000
A, B = "ab" * 32, "cd" * 32
S1, S2 = "11" * 32, "22" * 32
X, Y = "e1" * 32, "f2" * 32
P1, P2, P3 = "a1" * 32, "a2" * 32, "a3" * 32


def rec(
    i: int,
    sink: str,
    *,
    set_digest: str = A,
    symbols: str | None = S1,
    rgb: str | None = X,
    exact: bool = True,
    ran: bool = True,
    payload: str | None = P1,
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
            "set_digest": set_digest,
            "symbols_digest": symbols,
            "rgb_digest": rgb if ran else None,
            "needed": "decode-equivalence" if exact else "none",
            "path_ran": (
                ("cpu/wai-ops/integer" if exact else "cpu/onnx-runtime/float") if ran else None
            ),
            "tier": ("decode-equivalence" if exact else "none") if ran else None,
            "outcome": "decoded" if ran else "refused",
            "duration_ms": 1.0,
            "placement": {"cpu": 3} if ran else {},
            "refusals": [],
            "report": {"i": i},
            "source": "service" if payload else "sink",
            "request_digest": payload,
        }
    )


DATA = [
    rec(1, "a"),  # A/S1: two decodes of one payload on two sinks, one RGB
    rec(2, "b"),
    rec(3, "a", symbols=S2, payload=P2),  # A/S2: two RGB digests (the seeded disagreement)
    rec(4, "b", symbols=S2, rgb=Y, payload=P2, t=5_000),
    rec(5, "c", symbols=S2, rgb=None, payload=None, t=6_000),  # a sink's decode: RGB unknown
    rec(6, "a", set_digest=B, payload=P3, t=-10_000),  # B/S1
    rec(7, "a", symbols=S2, rgb=Y, exact=False, t=7_000),  # float: not the exact tier
    rec(8, "b", symbols=S2, ran=False, t=8_000),  # refused: no decode
]


def test_exact_table(store: ReportStore) -> None:
    store.insert(DATA)
    table = exact_table(store, Filters())
    assert table["total"] == 3 and table["next"] is None
    first, *rest = table["items"]
    assert first == {
        "set": A,
        "symbols_digest": S2,
        "decodes": 3,
        "rgb_digests": 2,
        "rgb_least": X,
        "rgb_greatest": Y,
        "rgb_unknown": 1,
        "payloads": 1,
        "sinks": 3,
        "last_seen_ms": T0 + 6_000,
        "set_version": None,  # the set registry has not set A
        "agree": False,
    }
    assert [(r["set"], r["symbols_digest"], r["decodes"], r["rgb_digests"]) for r in rest] == [
        (A, S1, 2, 1),
        (B, S1, 1, 1),
    ]
    assert all(r["agree"] and r["rgb_least"] == r["rgb_greatest"] == X for r in rest)
    assert [r["sinks"] for r in rest] == [2, 1]

    only = exact_table(store, Filters(), disagree=True)
    assert only["total"] == 1 and [r["symbols_digest"] for r in only["items"]] == [S2]
    assert exact_table(store, Filters(set=B))["total"] == 1
    by_b = exact_table(store, Filters(sink="b"))["items"]  # one sink: each group one RGB
    assert [(r["symbols_digest"], r["rgb_digests"]) for r in by_b] == [(S1, 1), (S2, 1)]
    late = exact_table(store, Filters(since_ms=T0 + 5_500))
    assert [(r["decodes"], r["rgb_digests"], r["rgb_unknown"]) for r in late["items"]] == [
        (1, 0, 1)
    ]

    seen, after = [], None
    while True:
        page = exact_table(store, Filters(), limit=1, after=after)
        assert page["total"] == 3
        seen += [(r["set"], r["symbols_digest"]) for r in page["items"]]
        after = page["next"]
        if after is None:
            break
    assert seen == [(A, S2), (A, S1), (B, S1)]
    past = exact_table(store, Filters(), limit=3, after=None)
    assert past["next"] is None
    with pytest.raises(CursorInvalid):
        exact_table(store, Filters(), after="bm90LWEtY3Vyc29y")


@pytest.mark.parametrize("filters", [Filters(since_ms=T0), Filters(since_ms=T0, sink="a", set=A)])
def test_exact_reads_its_index(store: ReportStore, filters: Filters) -> None:
    """The window's integer decodes are read from the partial index alone (no report row):
    SQLite's plan names it as covering; PostgreSQL's, with sequential scans priced out (a small
    table is read whole otherwise), is an index-only scan of it."""
    store.insert(DATA)
    with store.engine.begin() as conn:
        sql = str(exact_groups(filters).compile(conn, compile_kwargs={"literal_binds": True}))
        if conn.dialect.name == "sqlite":
            plan = " ".join(r[-1] for r in conn.execute(text("EXPLAIN QUERY PLAN " + sql)))
            assert "USING COVERING INDEX ix_reports_exact" in plan, plan
        else:
            conn.execute(text("SET LOCAL enable_seqscan = off"))
            plan = " ".join(r[0] for r in conn.execute(text("EXPLAIN " + sql)))
            # reports is partitioned by day (migration 0017): each partition read is an
            # index-only scan of its own part of ix_reports_exact
            parts = conn.execute(
                text(
                    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                    "WHERE i.inhparent = 'ix_reports_exact'::regclass"
                )
            ).scalars()
            names = {"ix_reports_exact", *parts}
            scans = re.findall(r"(\w[\w ]*?Scan)(?: using (\w+))? on (\w+)", plan)
            assert scans, plan
            for kind, index, _table in scans:
                assert (kind, index in names) == ("Index Only Scan", True), plan


def test_a_set_digest_comes_with_its_version(store: ReportStore) -> None:
    """Wherever the dashboard shows a set digest, the set registry's version comes beside it:
    the exact tier's groups, the decodes listed and one decode; ``None`` for a set it has
    not."""
    from sqlalchemy import insert

    from wai_dispatch.service.store.models import SetRow
    from wai_dispatch.service.store.reports import get_report, list_reports

    store.insert(DATA)
    facts = {"name": "demo", "capability": "c", "archive_bytes": 1, "chunks": 0, "bundled": False}
    with store.engine.begin() as conn:
        conn.execute(insert(SetRow), [{"digest": A, "version": "2.1", "installed_ms": 1, **facts}])
    table = exact_table(store, Filters())
    assert {(r["set"], r["set_version"]) for r in table["items"]} == {(A, "2.1"), (B, None)}
    listed = list_reports(store, Filters(), limit=50, cursor=None)["items"]
    assert {(r["set"], r["set_version"]) for r in listed} == {(A, "2.1"), (B, None)}
    one = next(r for r in listed if r["set"] == B)
    assert get_report(store, one["id"], None)["set_version"] is None
    one = next(r for r in listed if r["set"] == A)
    assert get_report(store, one["id"], None)["set_version"] == "2.1"
