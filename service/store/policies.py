"""Fleet governance in the report store: the model policy's versions (who set each, when), run
reports judged on arrival by the version then in force, and the dashboard's governance summary.

A run report is stored once: its id is unique, a resubmission with the same body gets the
stored verdict back, and its accepted decodes join ``reports`` (``source = 'sink'``) in the same
transaction as the run report, all in one multi-row insert (service/store/bulk.py), so a
decode is never stored twice.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from typing import Any

from sqlalchemy import Connection, and_, func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement

from wai_dispatch.dispatch import strictjson
from wai_dispatch.service.governance import (
    Policy,
    PolicyNotSet,
    PolicyVersion,
    RunReport,
    Verdict,
    judge,
    load_policy,
)
from wai_dispatch.service.store import keyset, rollups
from wai_dispatch.service.store.bulk import insert_records
from wai_dispatch.service.store.class_decodes import decodes_by_class
from wai_dispatch.service.store.errors import (
    PolicyBusy,
    RunReportConflict,
    RunReportNotFound,
    RunReportSinkMismatch,
)
from wai_dispatch.service.store.models import PolicyRow, RunReportRow
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.reports import set_versions

P = PolicyRow.__table__.c
RR = RunReportRow.__table__.c
_NS = uuid.UUID("6f1c3f0e-7a43-4c55-9d0b-2b1f6f0a5e11")  # names sink-reported report ids


def _now() -> int:
    return time.time_ns() // 1_000_000


def _version(row: Any) -> PolicyVersion:
    return PolicyVersion(row.version, row.set_by, row.set_ms, row.text, row.sha256)


class PolicyStore:
    """The ``policies`` table; parsed policies are cached by version (a version never changes)."""

    def __init__(self, store: ReportStore) -> None:
        self.store = store
        self._parsed: dict[int, Policy] = {}
        self._lock = threading.Lock()

    def versions(self) -> list[PolicyVersion]:
        query = select(PolicyRow.__table__).order_by(P.version)
        with self.store.engine.connect() as conn:
            return [_version(r) for r in conn.execute(query)]

    def current(self) -> PolicyVersion:
        query = select(PolicyRow.__table__).order_by(P.version.desc()).limit(1)
        with self.store.engine.connect() as conn:
            row = conn.execute(query).first()
        if row is None:
            raise PolicyNotSet("no model policy is set (`wai-dispatch policy set`, PUT /v1/policy)")
        return _version(row)

    def get(self, version: int) -> PolicyVersion:
        with self.store.engine.connect() as conn:
            row = conn.execute(select(PolicyRow.__table__).where(P.version == version)).first()
        if row is None:
            raise PolicyNotSet(f"no policy version {version}")
        return _version(row)

    def parsed(self, version: PolicyVersion) -> Policy:
        with self._lock:
            policy = self._parsed.get(version.version)
            if policy is None:
                policy = self._parsed[version.version] = version.policy()
            return policy

    def set(self, text: str | bytes, *, by: str, now_ms: int | None = None) -> PolicyVersion:
        """Validate and keep ``text`` as the next version (a bad policy raises, nothing kept)."""
        policy = load_policy(text, source="policy")
        for _ in range(20):  # two admins at once: the primary key gives each its own number
            at = _now() if now_ms is None else now_ms
            try:
                with self.store.engine.begin() as conn:
                    top = conn.execute(select(func.max(P.version))).scalar()
                    number = (top or 0) + 1
                    conn.execute(
                        insert(PolicyRow).values(
                            version=number,
                            set_ms=at,
                            set_by=by,
                            sha256=policy.sha256,
                            text=policy.text,
                        )
                    )
                return PolicyVersion(number, by, at, policy.text, policy.sha256)
            except IntegrityError:
                continue
        raise PolicyBusy("the policy changed under this request; try again")


def _records(run: RunReport, verdict: Verdict, received_ms: int) -> list[ReportRecord]:
    """The accepted decodes as store records, with ids derived from the run report's id, so a
    resubmission could never store them again even past the run report's own check."""
    request_id = str(uuid.uuid5(_NS, f"{run.sink}/{run.id}"))
    out = []
    for decision in verdict.decodes:
        if not decision.accepted:
            continue
        obj = run.decodes[decision.index]
        assert isinstance(obj, dict)
        out.append(
            ReportRecord.of(
                obj["report"],
                id=str(uuid.uuid5(_NS, f"{run.sink}/{run.id}/{decision.index}")),
                request_id=request_id,
                created_ms=received_ms,
                sink=run.sink,
                role="primary",
                set_digest=decision.set_digest,
                symbols_digest=decision.symbols_digest,
                rgb_digest=None,
                duration_ms=0.0,  # a run report states no duration
                source="sink",
                run_report=run.id,
                ordinal=decision.index,  # one request id for the run: its decodes apart
            )
        )
    return out


def submit(
    store: ReportStore, policies: PolicyStore, run: RunReport, body: bytes, *, sink: str
) -> tuple[dict[str, Any], bool]:
    """Judge and keep ``run``; returns the verdict and whether it was a resubmission."""
    if run.sink != sink:
        raise RunReportSinkMismatch(
            f"the run report is for sink {run.sink!r}, the token is {sink!r}'s",
        )
    digest = hashlib.sha256(body).hexdigest()
    stored = _stored(store, run.sink, run.id)
    if stored is not None:
        return _replay(stored, digest)
    received = _now()
    current = policies.current()  # the version in force when the run report arrived
    verdict = judge(run, policies.parsed(current), policy_version=current.version)
    answer = {**verdict.to_json(), "received_ms": received}
    row = {
        "id": run.id,
        "sink": run.sink,
        "sink_class": verdict.sink_class,
        "received_ms": received,
        "policy_version": current.version,
        "accepted": verdict.accepted,
        "decodes": len(verdict.decodes),
        "refused_decodes": answer["refused_decodes"],
        "body_sha256": digest,
        "body": body.decode("utf-8"),
        "verdict": json.dumps(answer, separators=(",", ":")),
    }
    with store.engine.begin() as conn:
        stmt = rollups.upsert_of(conn, RunReportRow.__table__).values(**row)
        stmt = stmt.on_conflict_do_nothing(index_elements=["sink", "id"])
        if conn.execute(stmt.returning(RR.seq)).scalar() is not None:
            rollups.add_run(
                conn,
                sink=run.sink,
                sink_class=verdict.sink_class,
                accepted=verdict.accepted,
                received_ms=received,
            )
            insert_records(conn, _records(run, verdict, received))
            return answer, False
    stored = _stored(store, run.sink, run.id)  # a twin request stored it first
    assert stored is not None
    return _replay(stored, digest)


def _stored(store: ReportStore, sink: str, run_id: str) -> Any:
    query = select(RR.body_sha256, RR.verdict).where(RR.sink == sink, RR.id == run_id)
    with store.engine.connect() as conn:
        return conn.execute(query).first()


def _replay(stored: Any, digest: str) -> tuple[dict[str, Any], bool]:
    if stored.body_sha256 != digest:
        raise RunReportConflict(
            "this sink submitted a run report with this id before, with another body; a run "
            "report's id names one run report of its sink",
        )
    return strictjson.loads(stored.verdict), True


def get_run_report(store: ReportStore, run_id: str, sink: str | None) -> dict[str, Any]:
    query = select(RR.body, RR.verdict, RR.received_ms).where(RR.id == run_id)
    if sink is not None:  # ids are unique per sink; without one, the latest of that id
        query = query.where(RR.sink == sink)
    query = query.order_by(RR.seq.desc()).limit(1)
    with store.engine.connect() as conn:
        row = conn.execute(query).first()
        if row is None:
            raise RunReportNotFound(f"no run report {run_id[:40]!r}")
        verdict = strictjson.loads(row.verdict)
        digests = [d.get("set_digest") for d in verdict.get("decodes", [])]
        versions = set_versions(conn, [d for d in digests if isinstance(d, str)])
    # each decode's set's version, where the set registry has it (the dashboard shows it
    # beside the digest)
    return {"run_report": strictjson.loads(row.body), "verdict": verdict, "set_versions": versions}


def governance_summary(
    store: ReportStore,
    policies: PolicyStore,
    *,
    since_ms: int | None,
    until_ms: int | None,
    sink_class: str | None,
    sink: str | None,
    latest: int = 10,
    after: str | None = None,
) -> dict[str, Any]:
    """Run reports accepted and refused per sink class (from their per-hour roll-ups,
    service/store/rollups.py, and the window's partial hours), the decodes of the class's
    sinks in the window and those no path ran (service/store/class_decodes.py: the sinks the
    policy in force puts in the class; a sink it names in none: the class ``None``,
    unclassified), and
    a page of the refused ones, latest first (``latest`` of them, paged by keyset: ``after``
    the cursor ``next``; their total is ``refused_total``), each with its first reasons and how
    many more it has."""
    where = _run_filters(since_ms, until_ms, sink_class, sink)
    current = _current(policies)
    members = {} if current is None else _members(policies.parsed(current))
    with store.engine.connect() as conn:
        decodes = decodes_by_class(
            conn, members, since_ms=since_ms, until_ms=until_ms, sink_class=sink_class, sink=sink
        )
        counts = [
            (cls, accepted, n)
            for (cls, accepted), (n, _) in rollups.run_counts(
                conn,
                "class",
                since_ms=since_ms,
                until_ms=until_ms,
                sink_class=sink_class,
                sink=sink,
            ).items()
        ]
        refused, cursor = _refused_page(conn, where, latest=latest, after=after)
    classes = _class_tally(policies, current, sink_class, counts, decodes)
    return {
        "policy": None if current is None else current.to_json(with_text=False),
        "classes": sorted(classes.values(), key=lambda c: (c["class"] is None, c["class"] or "")),
        "latest_refused": [_refused_row(r) for r in refused],
        "refused_total": sum(int(n) for _, accepted, n in counts if not accepted),
        "limit": latest,
        "next": cursor,
    }


def _refused_page(
    conn: Connection, where: list[ColumnElement[bool]], *, latest: int, after: str | None
) -> tuple[list[Any], str | None]:
    """The refused runs of the window, latest first: ``latest`` of them ``after`` the keyset
    cursor, and the cursor of the next page (None on the last)."""
    page = []
    if after is not None:
        ms, seq = keyset.decode("rr", after, [keyset.INT, keyset.INT])
        page.append((RR.received_ms < ms) | ((RR.received_ms == ms) & (RR.seq < seq)))
    rows = conn.execute(
        select(RR.seq, RR.id, RR.sink, RR.sink_class, RR.received_ms, RR.policy_version, RR.verdict)
        .where(and_(RR.accepted.is_(False), *where, *page))
        .order_by(RR.received_ms.desc(), RR.seq.desc())
        .limit(latest + 1)
    ).all()
    if len(rows) <= latest:
        return list(rows), None
    rows = rows[:latest]
    return list(rows), keyset.encode("rr", [rows[-1].received_ms, rows[-1].seq])


def _run_filters(
    since_ms: int | None, until_ms: int | None, sink_class: str | None, sink: str | None
) -> list[ColumnElement[bool]]:
    """The run reports of a window, of one class or one sink when given."""
    where = rollups.between(RR.received_ms, since_ms, until_ms)
    if sink_class:
        where.append(RR.sink_class == sink_class)
    if sink:
        where.append(RR.sink == sink)
    return where


def _current(policies: PolicyStore) -> PolicyVersion | None:
    """The policy in force (``None``: none set)."""
    try:
        return policies.current()
    except PolicyNotSet:
        return None


def _members(policy: Policy) -> dict[str, str]:
    """``sink → class`` of ``policy``."""
    return {sink: name for name, cls in sorted(policy.classes.items()) for sink in cls.sinks}


def _class_tally(
    policies: PolicyStore,
    current: PolicyVersion | None,
    sink_class: str | None,
    counts: list[tuple[str | None, bool, int]],
    decodes: dict[str | None, tuple[int, int]],
) -> dict[str | None, dict[str, Any]]:
    """Per class of ``current`` (every class it names, or ``sink_class`` alone) and any class
    the counts hold (``None``: unclassified): the runs accepted and refused, the decodes and
    those no path ran."""

    def blank(cls: str | None) -> dict[str, Any]:
        return {
            "class": cls,
            "runs_accepted": 0,
            "runs_refused": 0,
            "decodes": 0,
            "decodes_no_path": 0,
        }

    classes: dict[str | None, dict[str, Any]] = {}
    if current is not None:
        for name in policies.parsed(current).classes:
            if not sink_class or name == sink_class:
                classes[name] = blank(name)
    for cls, accepted, count in counts:
        entry = classes.setdefault(cls, blank(cls))
        entry["runs_accepted" if accepted else "runs_refused"] += int(count)
    for cls, (n, no_path) in decodes.items():
        entry = classes.setdefault(cls, blank(cls))
        entry["decodes"], entry["decodes_no_path"] = n, no_path
    return classes


def _refused_row(row: Any, cap: int = 20) -> dict[str, Any]:
    verdict = strictjson.loads(row.verdict)
    reasons = [
        {"index": d["index"], **reason} for d in verdict["decodes"] for reason in d["reasons"]
    ]
    return {
        "id": row.id,
        "sink": row.sink,
        "class": row.sink_class,
        "received_ms": row.received_ms,
        "policy_version": row.policy_version,
        "reasons": reasons[:cap],
        "more_reasons": max(0, len(reasons) - cap),
    }


def sinks_of_class(policies: PolicyStore, sink_class: str) -> tuple[str, ...]:
    """The sinks the policy in force puts in ``sink_class`` (none when there is no policy)."""
    try:
        current = policies.current()
    except PolicyNotSet:
        return ()
    cls = policies.parsed(current).classes.get(sink_class)
    return tuple(sorted(cls.sinks)) if cls else ()
