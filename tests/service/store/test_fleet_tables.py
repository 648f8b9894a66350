"""The dashboard's per-sink and per-set tables and the request errors, on SQLite and PostgreSQL:
pinned counts, rates, classes, last-seen times, sorting, paging and totals; the counts read from
the roll-ups (whole hours) equal the ones read from the reports; a set found by a prefix of its
digest; request errors noted off the request's path, listed by code and sink, pruned with the
reports, and dropped (counted, never raised) when the store is down."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from _reports import report
from sqlalchemy import insert, text

from wai_dispatch.service.store import bearer, keyset, report_store
from wai_dispatch.service.store.bearer import Role
from wai_dispatch.service.store.fleet import set_table, sink_table
from wai_dispatch.service.store.models import SetRow
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import SQLITE_BUSY_TIMEOUT_S, ReportStore
from wai_dispatch.service.store.reports import Filters
from wai_dispatch.service.store.request_error_views import list_errors
from wai_dispatch.service.store.request_errors import ErrorLog
from wai_dispatch.service.store.retention import prune

T0 = 1_796_000_000_000  # 3,200 s into its hour
HOUR = T0 - T0 % 3_600_000
A, B = "ab" * 32, "cd" * 32


def rec(i: int, sink: str, t: int, *, ran: bool = True, digest: str = A) -> ReportRecord:
    return report(i, sink, T0 + t, ran=ran, set_digest=digest)


# sink a: 3 reports (1 no path), sink b: 2 reports (1 no path); set B only on sink b
DATA = [
    rec(1, "a", 0),
    rec(2, "b", 1000),
    rec(3, "a", 3_600_000, ran=False),
    rec(4, "a", 3_600_500),
    rec(5, "b", 7_200_000, ran=False, digest=B),
]


def test_per_sink_table(store: ReportStore) -> None:
    store.insert(DATA)
    classes = {"a": "kiosk", "c": "archive"}  # c: named by the policy, never seen
    table = sink_table(store, Filters(), classes=classes)
    assert table["total"] == 3
    assert [r["sink"] for r in table["items"]] == ["a", "b", "c"]
    a, b, c = table["items"]
    assert a == {
        "sink": "a",
        "class": "kiosk",
        "reports": 3,
        "no_path": 1,
        "no_path_rate": 1 / 3,
        "request_errors": 0,
        "runs_accepted": 0,
        "runs_refused": 0,
        "last_seen_ms": T0 + 3_600_500,
    }
    assert (b["class"], b["reports"], b["no_path_rate"]) == (None, 2, 0.5)
    assert (c["reports"], c["no_path_rate"], c["last_seen_ms"]) == (0, None, None)
    worst = sink_table(store, Filters(), classes=classes, sort="no_path_rate", desc=True)
    assert [r["sink"] for r in worst["items"]] == ["b", "a", "c"]  # never seen: last
    first = sink_table(store, Filters(), classes=classes, limit=1)
    page = sink_table(store, Filters(), classes=classes, limit=1, after=first["next"])
    assert (page["total"], [r["sink"] for r in page["items"]]) == (3, ["b"])
    last = sink_table(store, Filters(), classes=classes, limit=1, after=page["next"])
    assert ([r["sink"] for r in last["items"]], last["next"]) == (["c"], None)
    # keyset by the sort value: the page after "b" by rate, most first, is "a" then "c"
    by_rate = sink_table(store, Filters(), classes=classes, sort="no_path_rate", desc=True, limit=1)
    rest = sink_table(
        store, Filters(), classes=classes, sort="no_path_rate", desc=True, after=by_rate["next"]
    )
    assert [r["sink"] for r in rest["items"]] == ["a", "c"]
    # past a row with no rate (never seen), only such rows follow, by name, in both directions
    unseen = {**classes, "d": "archive"}
    for desc in (False, True):
        by = {"sort": "no_path_rate", "desc": desc, "limit": 3}
        head = sink_table(store, Filters(), classes=unseen, **by)
        assert [r["sink"] for r in head["items"]][-1] == "c"
        tail = sink_table(store, Filters(), classes=unseen, **by, after=head["next"])
        assert ([r["sink"] for r in tail["items"]], tail["next"]) == (["d"], None)
    assert sink_table(store, Filters(sinks=("a",)), classes=classes)["total"] == 1
    assert [r["sink"] for r in sink_table(store, Filters(), classes={}, search="B")["items"]] == [
        "b"
    ]
    # the search folds ASCII letters only, on both stores: "É" and "é" are different letters
    accents = {"Éa": "kiosk", "éb": "kiosk"}
    for q, found in (("é", ["éb"]), ("É", ["Éa"]), ("A", ["a", "Éa"]), ("%", [])):
        rows = sink_table(store, Filters(), classes=accents, search=q)["items"]
        assert [r["sink"] for r in rows] == found, q
    # whole hours from the roll-ups, the edges from the reports: the same counts
    window = Filters(since_ms=HOUR, until_ms=HOUR + 3 * 3_600_000)
    edges = Filters(since_ms=T0 - 1, until_ms=T0 + 7_200_001)
    for f in (window, edges):
        rows = {r["sink"]: r for r in sink_table(store, f, classes={})["items"]}
        assert {s: (r["reports"], r["no_path"]) for s, r in rows.items()} == {
            "a": (3, 1),
            "b": (2, 1),
        }
        assert rows["a"]["last_seen_ms"] == T0 + 3_600_500
    # filters the roll-ups cannot answer read the reports, the whole time axis
    one = sink_table(store, Filters(request_id="req-4"), classes={})["items"]
    assert [(r["sink"], r["reports"]) for r in one] == [("a", 1)]
    assert sink_table(store, Filters(reason="dispatch_unit_absent"), classes={})["total"] == 0
    late = sink_table(store, Filters(since_ms=T0 + 3_600_000), classes={})["items"]
    assert {r["sink"]: r["reports"] for r in late} == {"a": 2, "b": 1}


def test_every_known_sink_sorted_both_ways_and_decoded_nothing(store: ReportStore) -> None:
    """A sink only a token knows, one only the policy names, one with reports that all refused
    and sinks that decoded: every one a row, zero counts included; ascending by reports pages
    through the quiet ones first; "decoded nothing" keeps the sinks with no decoded report."""
    store.insert([*DATA, rec(6, "d", 10, ran=False)])  # d: one report, refused
    bearer.create(store, "t", Role.sink)  # a sink only its token knows
    bearer.create(store, "gone", Role.sink)
    bearer.revoke(store, "gone")  # a revoked token names no sink
    bearer.create(store, "ops", Role.operator)  # not a sink
    classes = {"a": "kiosk", "c": "archive"}  # c: named by the policy only

    def names(**kw: object) -> list[str]:
        return [r["sink"] for r in sink_table(store, Filters(), classes=classes, **kw)["items"]]

    assert names() == ["a", "b", "c", "d", "t"]
    assert names(sort="reports") == ["c", "t", "d", "b", "a"]  # 0, 0, 1, 2, 3
    assert names(sort="reports", desc=True) == ["a", "b", "d", "c", "t"]  # ties: by name
    assert names(decoded_nothing=True) == ["c", "d", "t"]
    nothing = sink_table(store, Filters(), classes=classes, decoded_nothing=True, sort="reports")
    assert [(r["sink"], r["reports"], r["class"]) for r in nothing["items"]] == [
        ("c", 0, "archive"),
        ("t", 0, None),
        ("d", 1, None),
    ]
    # one page at a time, ascending by reports: the same rows, in the same order
    seen, after = [], None
    while True:
        page = sink_table(store, Filters(), classes=classes, sort="reports", limit=2, after=after)
        assert page["total"] == 5
        seen += [r["sink"] for r in page["items"]]
        if (after := page["next"]) is None:
            break
    assert seen == names(sort="reports")
    past = keyset.encode("sink:reports:0", [99, "z"])  # after the last row: none, the total
    end = sink_table(store, Filters(), classes=classes, sort="reports", after=past)
    assert (end["items"], end["total"], end["next"]) == ([], 5, None)
    # a window with nothing in it: every known sink, every count zero
    empty = sink_table(store, Filters(since_ms=T0 + 10**9), classes=classes, limit=500)
    assert [(r["sink"], r["reports"], r["last_seen_ms"]) for r in empty["items"]] == [
        ("a", 0, None),
        ("c", 0, None),
        ("t", 0, None),
    ]


def test_per_set_table_and_prefix(store: ReportStore) -> None:
    store.insert(DATA)
    known = {"name": "one", "capability": "wai.neural.bmshj2018", "version": "2.1"}
    facts = {"archive_bytes": 1, "chunks": 1, "bundled": False, "installed_ms": T0}
    with store.engine.begin() as conn:  # set A in the registry: its name, capability, version
        conn.execute(insert(SetRow), [{"digest": A, **known, **facts}])
    table = set_table(store, Filters())
    assert table["total"] == 2
    first, second = table["items"]  # most reports first
    assert (first["set"], first["reports"], first["no_path"], first["sinks"]) == (A, 4, 1, 2)
    assert {k: first[k] for k in known} == known
    assert (second["name"], second["capability"], second["version"]) == (None, None, None)
    assert (second["set"], second["no_path_rate"], second["last_seen_ms"]) == (
        B,
        1.0,
        T0 + 7_200_000,
    )
    assert [r["set"] for r in set_table(store, Filters(), prefix="CD")["items"]] == [B]
    assert set_table(store, Filters(), prefix="ef")["total"] == 0
    assert set_table(store, Filters(sink="a"))["total"] == 1
    # filters the activity roll-ups cannot answer: the per-hour roll-ups and the reports
    refused = set_table(store, Filters(outcome="refused"), sort="set", desc=False)["items"]
    assert [(r["set"], r["reports"], r["no_path"], r["sinks"]) for r in refused] == [
        (A, 1, 1, 1),
        (B, 1, 1, 1),
    ]
    one = set_table(store, Filters(request_id="req-4"))["items"]
    assert [(r["set"], r["reports"], r["last_seen_ms"]) for r in one] == [(A, 1, T0 + 3_600_500)]


def test_request_errors_noted_listed_and_pruned(store: ReportStore) -> None:
    errors = ErrorLog(store)
    try:
        errors.note(
            400, "request_invalid", sink="a", request_id="r1", method="POST", path="/v1/decode"
        )
        errors.note(
            400, "request_invalid", sink="a", request_id="r2", method="POST", path="/v1/decode"
        )
        errors.note(
            401,
            "auth_invalid",
            sink=None,
            request_id="r3",
            method="GET",
            path="/v1/reports",
            route="/v1/reports",
        )
        assert errors.flush()
        # the anonymous error is counted, never kept as a row
        assert (errors.counted, errors.written, errors.dropped) == (3, 2, 0)
    finally:
        errors.close()
    got = list_errors(store, limit=1)
    assert got["total"] == 3 and len(got["items"]) == 1
    assert got["by_code"] == [
        {"code": "request_invalid", "status": 400, "count": 2},
        {"code": "auth_invalid", "status": 401, "count": 1},
    ]
    assert got["by_sink"] == [{"sink": "a", "count": 2}, {"sink": None, "count": 1}]
    assert got["by_route"] == [
        {"route": "(no route)", "count": 2},
        {"route": "/v1/reports", "count": 1},
    ]
    assert got["rows"] == {"kept": 2, "dropped": 0}
    assert got["items"][0]["request_id"] == "r2"  # newest first
    assert list_errors(store, sinks=("a",), after=got["next"])["items"][0]["request_id"] == "r1"
    table = sink_table(store, Filters(), classes={})
    assert [(r["sink"], r["request_errors"]) for r in table["items"]] == [("a", 2)]
    assert prune(store, report_days=1, rollup_days=0).request_errors == 0  # all recent
    now = got["items"][0]["time_ms"]
    assert (
        prune(store, report_days=1, rollup_days=0, now_ms=now + 3 * 86_400_000).request_errors == 2
    )
    assert list_errors(store)["total"] == 0  # the roll-ups of those hours went too


def test_request_errors_wait_while_the_store_is_down(tmp_path: Path) -> None:
    down = ReportStore(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    errors = ErrorLog(down)
    try:
        errors.note(404, "not_found", sink=None, request_id="r", method="GET", path="/x")
        assert not errors.flush()  # never raised: held in memory, counted as pending
        assert (errors.counted, errors.written, errors.pending) == (0, 0, 1)
        down.migrate()  # the store is back: what was held is written
        assert errors.flush()
        assert (errors.counted, errors.pending) == (1, 0)
        assert list_errors(down)["total"] == 1
    finally:
        errors.close()
        down.dispose()


def test_request_errors_flush_waits_out_a_busy_store(tmp_path: Path) -> None:
    """Another process's writer holds SQLite's lock past two busy timeouts (the log's own
    thread's try and flush's first): the write is held
    back ("database is locked"), and ``flush`` tries again while the store answers, instead of
    reporting what is merely late as not written (the dashboard's suite read that as lost)."""
    path = tmp_path / "busy.db"
    busy = ReportStore(f"sqlite:///{path}")
    busy.migrate()
    errors = ErrorLog(busy)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        errors.note(404, "not_found", sink=None, request_id="r", method="GET", path="/x")
        other.execute("BEGIN IMMEDIATE")
        release = threading.Timer(2 * SQLITE_BUSY_TIMEOUT_S + 0.5, other.rollback)
        release.start()
        assert errors.flush(timeout_s=10)
        release.join()
        assert (errors.counted, errors.pending) == (1, 0)
        assert list_errors(busy)["total"] == 1
    finally:
        other.close()
        errors.close()
        busy.dispose()


@pytest.mark.slow
def test_request_errors_flush_outlasts_a_write_queued_behind_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer of this process holds the store's write lock for longer than flush once
    waited (5 s), while the log's own thread's write is queued behind it: ``flush`` waits for
    that write (``flush_wait_s``: two writes' longest waits) instead of reporting what is merely
    queued as not written (CI's dashboard suite read that as lost, on a busy machine)."""
    monkeypatch.setattr(report_store, "SQLITE_WRITERS_WAIT_S", 6.0)
    store = ReportStore(f"sqlite:///{tmp_path / 'queued.db'}")
    store.migrate()
    errors = ErrorLog(store, interval_s=0.05)
    holding = threading.Event()

    def hold() -> None:
        with store.engine.begin() as conn:
            conn.execute(text("DELETE FROM request_errors WHERE 0"))  # takes the write lock
            holding.set()
            time.sleep(5.5)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(5)
        errors.note(404, "not_found", sink="a", request_id="r", method="GET", path="/x")
        time.sleep(0.3)  # the log's thread has taken the counts and waits for the lock
        assert errors.pending == 0
        assert errors.flush()
        assert (errors.counted, errors.written) == (1, 1)
        assert list_errors(store)["total"] == 1
    finally:
        holder.join()
        errors.close()
        store.dispose()


def test_activity_rollups_equal_a_recount_over_days(store: ReportStore) -> None:
    """The fleet tables read whole days, whole hours and the edges' reports: the same reports,
    no-path reports, sinks and exact last-seen times as a count of the reports themselves."""
    import random

    rng = random.Random(5)
    day = 86_400_000
    recs = [
        rec(
            100 + i,
            rng.choice("abc"),
            -rng.randrange(5 * day),
            ran=rng.random() < 0.7,
            digest=rng.choice((A, B)),
        )
        for i in range(300)
    ]
    assert store.insert(recs) == 300
    for _ in range(25):
        lo = T0 - rng.randrange(6 * day) if rng.random() < 0.9 else None
        if lo is not None and rng.random() < 0.3:
            lo -= lo % day
        hi = T0 + 1 - rng.randrange(2 * day) if rng.random() < 0.8 else None
        f = Filters(since_ms=lo, until_ms=hi, sink=rng.choice((None, None, "a")))
        chosen = [
            r
            for r in recs
            if (lo is None or r.created_ms >= lo)
            and (hi is None or r.created_ms < hi)
            and (f.sink is None or r.sink == f.sink)
        ]
        want: dict[str, tuple[int, int, int]] = {}
        for r in chosen:
            n, no, last = want.get(r.sink, (0, 0, 0))
            want[r.sink] = (n + 1, no + (r.outcome == "refused"), max(last, r.created_ms))
        rows = sink_table(store, f, classes={})["items"]
        assert {r["sink"]: (r["reports"], r["no_path"], r["last_seen_ms"]) for r in rows} == want
        sets = {r["set"]: (r["reports"], r["sinks"]) for r in set_table(store, f)["items"]}
        assert sets == {
            d: (
                sum(r.set_digest == d for r in chosen),
                len({r.sink for r in chosen if r.set_digest == d}),
            )
            for d in {r.set_digest for r in chosen}
        }


def test_the_sets_table_up_to_now_reads_a_row_a_sink_and_set(store: ReportStore) -> None:
    """A window that reaches now is counted from the fleet's roll-ups and ``sink_sets``
    (fleet.py): the same reports, no-path reports, sinks and exact last-seen times as a
    count of the reports; a window that ends before a pair's latest report is not (``None``);
    the pairs the inserts kept equal the ones recomputed from the days."""
    import random

    from sqlalchemy import text

    from wai_dispatch.service.store import rollups
    from wai_dispatch.service.store.fleet import _sets_up_to_now

    rng = random.Random(7)
    day = 86_400_000
    recs = [
        rec(
            500 + i,
            rng.choice("abcd"),
            -rng.randrange(4 * day),
            ran=rng.random() < 0.6,
            digest=rng.choice((A, B, "")),
        )
        for i in range(240)
    ]
    for i in range(0, 240, 40):  # several transactions: the pairs' latest times move
        store.record(recs[i : i + 40])
        if i == 120:  # half of them folded into the roll-ups, the rest read from the inbox
            with store.engine.begin() as conn:
                rollups.fold_all(conn)
    latest = max(r.created_ms for r in recs)
    windows = [
        (None, None),
        (T0 - 2 * day - 77, None),
        (T0 - day, latest + 1),
        (T0 - day + day // 2, T0 + day),
        (HOUR - 3 * day, T0 + 5),
    ]
    with store.engine.connect() as conn:
        for lo, hi in windows:
            got = _sets_up_to_now(conn, Filters(since_ms=lo, until_ms=hi))
            assert got is not None
            chosen = [
                r
                for r in recs
                if r.set_digest
                and (lo is None or r.created_ms >= lo)
                and (hi is None or r.created_ms < hi)
            ]
            want = {}
            for d in {r.set_digest for r in chosen}:
                of = [r for r in chosen if r.set_digest == d]
                want[d] = (
                    len(of),
                    sum(r.outcome == "refused" for r in of),
                    {r.sink for r in of},
                    max(r.created_ms for r in of),
                )
            assert {
                d: (v["reports"], v["no_path"], v["sinks"], v["last_seen_ms"])
                for d, v in got.items()
            } == want
        assert _sets_up_to_now(conn, Filters(since_ms=None, until_ms=latest)) is None
        assert _sets_up_to_now(conn, Filters(until_ms=latest + 1, sink="a")) is None
    with store.engine.begin() as conn:
        rollups.fold_all(conn)
        kept = conn.execute(text("SELECT sink, set_digest, last_ms FROM sink_sets")).all()
    with store.engine.begin() as conn:
        rollups.rebuild_pairs(conn)
        again = conn.execute(text("SELECT sink, set_digest, last_ms FROM sink_sets")).all()
    assert sorted(map(tuple, kept)) == sorted(map(tuple, again)) and len(kept) > 8
