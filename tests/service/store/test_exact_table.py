"""The exact tier's table, on SQLite and PostgreSQL: the window's integer decodes grouped by set
and symbols digest, their distinct RGB digests pinned, a seeded disagreement first and flagged,
a sink's decode counted with its RGB unknown, float decodes and refusals left out, paged by
keyset (every row once), the "disagree" filter, and a cursor of another list refused; the
statement reads ``ix_reports_exact`` (its plan, on each store)."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from sqlalchemy import event, select, text

from wai_dispatch.service.store.aggregator import Aggregator
from wai_dispatch.service.store.errors import CursorInvalid
from wai_dispatch.service.store.fleet import _exact_rolled, exact_groups, exact_table, sink_groups
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.reports import Filters
from wai_dispatch.service.store.retention import prune_rollups
from wai_dispatch.service.store.rollups import EXACT_DAYS, EXACT_GROUPS

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


DAY = 86_400_000


def recount(records: list[ReportRecord], f: Filters, disagree: bool = False) -> list[Any]:
    """The exact tier's groups of ``f``'s window, counted in Python from the records, in the
    table's order (the most RGB digests first where they disagree, then set and symbols)."""
    groups: dict[tuple[str, str], list[ReportRecord]] = {}
    for r in records:
        if r.tier != "decode-equivalence" or r.set_digest is None or r.symbols_digest is None:
            continue
        if f.set is not None and r.set_digest != f.set:
            continue
        if (f.sink is not None and r.sink != f.sink) or (f.sinks and r.sink not in f.sinks):
            continue
        if f.since_ms is not None and r.created_ms < f.since_ms:
            continue
        if f.until_ms is not None and r.created_ms >= f.until_ms:
            continue
        groups.setdefault((r.set_digest, r.symbols_digest), []).append(r)
    out = []
    for (digest, symbols), rs in groups.items():
        rgb = sorted({r.rgb_digest for r in rs if r.rgb_digest})
        if disagree and len(rgb) < 2:
            continue
        out.append(
            {
                "set": digest,
                "symbols_digest": symbols,
                "decodes": len(rs),
                "rgb_digests": len(rgb),
                "rgb_least": rgb[0] if rgb else None,
                "rgb_greatest": rgb[-1] if rgb else None,
                "rgb_unknown": sum(r.rgb_digest is None for r in rs),
                "payloads": len({r.request_digest for r in rs if r.request_digest}),
                "sinks": len({r.sink for r in rs}),
                "last_seen_ms": max(r.created_ms for r in rs),
                "set_version": None,
                "agree": len(rgb) <= 1,
            }
        )
    rank = lambda r: r["rgb_digests"] if r["rgb_digests"] > 1 else 0  # noqa: E731
    return sorted(out, key=lambda r: (-rank(r), r["set"], r["symbols_digest"]))


def drawn(rng: random.Random, n: int, end_ms: int) -> list[ReportRecord]:
    """``n`` decodes over the 4 days before ``end_ms`` (a few at or after it), mostly at the
    exact tier: few payloads, some decoded to another RGB digest, some RGB unknown."""
    out = []
    for i in range(n):
        symbols = rng.choice((S1, S2, "33" * 32, "44" * 32, "55" * 32, "66" * 32))
        rgb = rng.choice((X, X, X, None, Y)) if symbols in (S2, "33" * 32) else X
        out.append(
            rec(
                i + 100,
                rng.choice(("a", "b", "c")),
                set_digest=rng.choice((A, B)),
                symbols=symbols,
                rgb=rgb if rng.random() > 0.2 else None,
                exact=rng.random() > 0.15,
                ran=rng.random() > 0.05,
                payload=rng.choice((P1, P2, None)),
                t=end_ms - T0 - rng.randrange(4 * DAY) + rng.choice((0, 0, 0, 0, 0, 2 * DAY)),
            )
        )
    return out


def pages(store: ReportStore, f: Filters, disagree: bool, limit: int) -> tuple[list[Any], int]:
    seen: list[Any] = []
    after = None
    while True:
        page = exact_table(store, f, disagree=disagree, limit=limit, after=after)
        seen += page["items"]
        after = page["next"]
        if after is None:
            return seen, page["total"]


def half_folded(store: ReportStore, seed: int) -> tuple[list[ReportRecord], int]:
    """400 drawn records over ten days to ``end``, 250 of them folded, the rest in the inbox."""
    end = T0 + 10 * DAY
    records = drawn(random.Random(seed), 400, end)
    store.insert(records[:250])
    Aggregator(store, start=False).drain()
    store.insert(records[250:])
    return records, end


def answers_as_counted(
    store: ReportStore, records: list[ReportRecord], f: Filters, folded: bool
) -> None:
    """Every page (1, 3 and 50 a page) and total of the window ``f``, with and without the
    "disagree" filter, as counted in Python from ``records``."""
    for disagree in (False, True):
        want = recount(records, f, disagree)
        for limit in (1, 3, 50):
            got, total = pages(store, f, disagree, limit)
            assert total == len(want), (f, disagree, folded)
            assert got == want, (f, disagree, limit, folded)


@pytest.mark.slow
def test_the_roll_ups_answer_as_a_recount(store: ReportStore) -> None:
    """A window of a day or more (whole UTC days, partial ones at its edges, or none whole) is
    read from the exact tier's roll-ups (fleet._exact_rolled): every group, count and page as
    counted in Python from the records, with reports folded, in the inbox, or both, a window
    ending before decodes that follow it, and the "disagree" filter; the total beside each
    page."""
    records, end = half_folded(store, 37)
    windows = [
        Filters(),
        Filters(since_ms=end - 4 * DAY),
        Filters(since_ms=end - 3 * DAY - 12_345, until_ms=end - 5_000),
        Filters(since_ms=end - 3 * DAY - DAY % 7, until_ms=end - DAY - 777),
        Filters(since_ms=end - 4 * DAY, set=A),
        Filters(until_ms=end - 2 * DAY + 1),
        Filters(since_ms=end - DAY - 1_234, until_ms=end - 1_000),  # a day, no whole UTC day
    ]
    for folded in (False, True):
        for f in windows:
            with store.engine.connect() as conn:  # read from the roll-ups, not the reports
                assert _exact_rolled(conn, f, disagree=False, limit=1, after=None) is not None
            answers_as_counted(store, records, f, folded)
        Aggregator(store, start=False).drain()


@pytest.mark.slow
def test_a_sinks_rows_answer_as_a_recount(store: ReportStore) -> None:
    """The table filtered by a sink or a class's sinks is read from their rows alone
    (fleet.sink_groups: ``exact_days`` by ``ix_exact_days_sink`` for the whole days, their
    reports for the partial days): every group, count and page as counted in Python, folded,
    in the inbox or both, the "disagree" filter too."""
    records, end = half_folded(store, 38)
    windows = [
        Filters(sink="a"),
        Filters(sink="b", since_ms=end - 3 * DAY - 12_345, until_ms=end - 5_000),
        Filters(sinks=("a", "c"), since_ms=end - 4 * DAY, set=A),
        Filters(sink="c", since_ms=end - DAY + 1_234, until_ms=end - 1_000),  # no whole day
        Filters(sink="a", sinks=("b", "c")),  # none
    ]
    for folded in (False, True):
        for f in windows:
            with store.engine.connect() as conn:
                assert sink_groups(conn, f) is not None
            answers_as_counted(store, records, f, folded)
        Aggregator(store, start=False).drain()


def test_a_sinks_days_are_read_by_their_index(store: ReportStore) -> None:
    """One sink's whole days are found by ``ix_exact_days_sink`` (SQLite's planner by its
    rules; PostgreSQL's with sequential scans priced out), not a scan of ``exact_days``."""
    store.insert(drawn(random.Random(6), 300, T0 + 10 * DAY))
    Aggregator(store, start=False).drain()
    seen: list[tuple[str, Any]] = []

    def note(conn: Any, cursor: Any, sql: str, params: Any, *_: Any) -> None:
        seen.append((sql, params))

    event.listen(store.engine, "before_cursor_execute", note)
    try:
        exact_table(store, Filters(sink="a", since_ms=T0 + 6 * DAY - 5_000))
    finally:
        event.remove(store.engine, "before_cursor_execute", note)
    sql, params = next((q, p) for q, p in seen if "sink_rows" in q)
    with store.engine.connect() as conn, conn.begin():
        if store.dialect == "sqlite":
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params).all()
            plan = " ".join(str(r[-1]) for r in rows)
        else:
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            plan = " ".join(str(r[0]) for r in conn.exec_driver_sql("EXPLAIN " + sql, params))
    assert "ix_exact_days_sink" in plan, plan
    assert not re.search(r"SCAN exact_days\b(?! USING)|Seq Scan on exact_days", plan), plan


#: The exact tier's roll-up reads of a window of whole days (fleet._exact_rolled): a piece of
#: each statement, the index its plan must name (a regular expression; SQLite names a primary
#: key ``sqlite_autoindex_<table>_1``), and whether it must sort nothing (the walk in key order).
#: The groups of the whole days are summed from ``exact_group_days``, read whole (a row a set
#: and day).
ROLLED_READS = [
    (
        "the groups of its partial days, counted",
        r"SELECT count\(\*\) AS count_1\s+FROM exact_groups",
        "ix_exact_groups_last",
        False,
    ),
    (
        "the groups that ever disagreed",
        r"WHERE rgb_least < rgb_greatest",
        "ix_exact_groups_disagree",
        False,
    ),
    ("a page's groups, in key order", r"last_ms \+ ", "pk_exact_groups", True),
    (
        "a page's groups' days",
        r"exact_days_now\.symbols_digest IN",
        "(pk_exact_days|ix_exact_days_start)",
        False,
    ),
]


@pytest.mark.parametrize(
    ("name", "statement", "index", "sorted_"), ROLLED_READS, ids=[r[0] for r in ROLLED_READS]
)
def test_the_roll_up_reads_use_their_indexes(
    store: ReportStore, name: str, statement: str, index: str, sorted_: bool
) -> None:
    """Each statement of a page read from the exact tier's roll-ups names its index in its
    plan (no scan of a whole roll-up, and the walk in key order sorts nothing): SQLite's
    planner by its own rules, PostgreSQL's with sequential scans priced out (a small table is
    read whole otherwise), after ``VACUUM ANALYZE``."""
    rng = random.Random(5)
    end = T0 + 10 * DAY
    store.insert(drawn(rng, 300, end))
    Aggregator(store, start=False).drain()
    if store.dialect == "postgresql":
        with store.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                "VACUUM ANALYZE exact_groups, exact_days"
            )
    seen: list[tuple[str, Any]] = []

    def note(conn: Any, cursor: Any, sql: str, params: Any, *_: Any) -> None:
        seen.append((sql, params))

    event.listen(store.engine, "before_cursor_execute", note)
    try:
        exact_table(store, Filters(since_ms=end - 3 * DAY - 5_000, until_ms=end - 5_000))
    finally:
        event.remove(store.engine, "before_cursor_execute", note)
    picked = [(sql, p) for sql, p in seen if re.search(statement, sql, re.S)]
    assert picked, f"{name}: none sent: {[s for s, _ in seen]}"
    sql, params = picked[0]
    with store.engine.connect() as conn, conn.begin():
        if store.dialect == "sqlite":
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params).all()
            got = "\n".join(str(r[-1]) for r in rows)
            named = re.sub(r"pk_(exact_\w+)", r"sqlite_autoindex_\1_1", index)
            sort = "TEMP B-TREE" in got
            whole = re.search(r"SCAN exact_(days|groups)$", got, re.M)
        else:
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            rows = conn.exec_driver_sql("EXPLAIN " + sql, params).all()
            got = "\n".join(str(r[0]) for r in rows)
            named = index
            sort = re.search(r"^\s*(->\s*)?Sort\b", got, re.M)
            whole = re.search(r"Seq Scan on exact_", got)
    assert re.search(named, got), f"{name}:\n{sql}\n{got}"
    assert not whole, f"{name}:\n{sql}\n{got}"
    assert not (sorted_ and sort), f"{name}:\n{sql}\n{got}"


def test_pruned_roll_ups_keep_the_days_after_the_horizon(store: ReportStore) -> None:
    """Retention's pruning of the roll-ups (retention.prune_rollups) takes the exact tier's days
    wholly before the horizon and the groups whose latest decode is before the horizon's day;
    a window from the horizon on still reads as the records count it, and a report of a pruned
    hour folded later brings nothing back (the horizon)."""
    rng = random.Random(11)
    end = T0 + 10 * DAY
    records = drawn(rng, 300, end)
    store.insert(records)
    Aggregator(store, start=False).drain()
    cut = end - 2 * DAY - 7 * 3_600_000  # an hour's start, within a day
    prune_rollups(store, cut)
    with store.engine.connect() as conn:
        days = conn.execute(select(EXACT_DAYS.c.start_ms)).scalars().all()
        lasts = conn.execute(select(EXACT_GROUPS.c.last_ms)).scalars().all()
    assert days and min(days) + DAY > cut
    assert lasts and min(lasts) >= cut - cut % DAY
    late = rec(9999, "a", symbols="77" * 32, payload=P3, t=cut - T0 - 3_600_000)
    store.insert([late])  # of a pruned hour: counted in no roll-up
    Aggregator(store, start=False).drain()
    with store.engine.connect() as conn:
        groups = conn.execute(select(EXACT_GROUPS.c.symbols_digest)).scalars().all()
        assert "77" * 32 not in groups
    for f in (Filters(since_ms=cut), Filters(since_ms=cut - cut % DAY + DAY, until_ms=end)):
        with store.engine.connect() as conn:
            assert _exact_rolled(conn, f, disagree=False, limit=1, after=None) is not None
        want = recount(records, f)
        got, total = pages(store, f, False, 7)
        assert (got, total) == (want, len(want)), f
