"""PostgreSQL's ``reports`` in daily partitions (migration 0017), and retention by whole
partitions. SQLite keeps one table (this module is not used there).

``reports`` is partitioned by range of ``created_ms``: one partition a UTC day,
``reports_dYYYYMMDD``, and ``reports_default``, which catches a report of a day that has no
partition (a sink's report from before the oldest partition, a clock far ahead), so no report
is ever refused for want of a partition. :func:`ensure` makes today's partition and the
:data:`AHEAD` days' after it (the writers call it through :func:`ready`, once a day a
connection; ``migrate`` through :func:`ensure` itself); a day whose reports sit in the default
partition already gets its partition with them moved in, in the same transaction.

A unique key on a partitioned table must hold the partition key, so the report's id and its
identity ``(request_id, sink, ordinal)`` are unique in ``report_keys`` instead (the id its
primary key, the identity a unique index, ``created_ms`` and ``seq`` to find the report by
``reports``' primary key, service/store/report_keys.py): the
writers' one statement inserts a report's key first, ``ON CONFLICT DO NOTHING``, and the report
only when its key went in (service/store/bulk_pg.py), so exactly-once does not depend on which
partition a report lands in.

:func:`drop_before` is retention on PostgreSQL: each partition whose day ends at or before the
cut-off is detached (a short exclusive lock on ``reports``, not while a report of it waits in
``report_inbox``), its refusals and keys deleted, and its table dropped; each step is its own
transaction, and a partition detached but not yet dropped (a crash between) is finished by the
next pass; the lock is waited for :data:`LOCK_WAIT` at most (a long read holding ``reports``:
the next pass tries again). The keys go after the reports: until then a report resent for a
dropped day is still refused as a duplicate."""

from __future__ import annotations

import datetime as dt
import logging
import re

from sqlalchemy import (
    Connection,
    Engine,
    text,
)
from sqlalchemy.exc import OperationalError

from wai_dispatch.service.store.rollups import DAY_MS

__all__ = ["AHEAD", "DEFAULT", "day_name", "drop_before", "ensure", "ready"]

log = logging.getLogger("wai_dispatch.service.retention")

#: How long retention waits for the exclusive lock that detaches a partition (the writers
#: queue behind it meanwhile); not had in time, the partition waits for the next pass.
LOCK_WAIT = "2s"
#: Days after today whose partitions :func:`ensure` makes ready.
AHEAD = 3
DEFAULT = "reports_default"
_NAME = re.compile(r"^reports_d(\d{8})$")
#: The advisory lock that serialises making partitions (a migration holds 74201).
_LOCK = 74202
#: Where a pooled connection notes the day it last made sure of (:func:`ready`).
_READY = "wai_partitions_day"


def day_name(day: int) -> str:
    """The partition of the ``day``-th UTC day since the epoch."""
    return "reports_d" + (dt.date(1970, 1, 1) + dt.timedelta(days=day)).strftime("%Y%m%d")


def _day(name: str) -> int | None:
    m = _NAME.match(name)
    if m is None:
        return None
    d = dt.datetime.strptime(m.group(1), "%Y%m%d").date()
    return (d - dt.date(1970, 1, 1)).days


def attached(conn: Connection) -> set[str]:
    """The names of ``reports``' partitions."""
    rows = conn.execute(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'reports'::regclass"
        )
    )
    return {str(r) for r in rows.scalars()}


def _create(conn: Connection, day: int) -> None:
    name, lo, hi = day_name(day), day * DAY_MS, (day + 1) * DAY_MS
    waiting = conn.execute(
        text(f"SELECT 1 FROM {DEFAULT} WHERE created_ms >= :lo AND created_ms < :hi LIMIT 1"),
        {"lo": lo, "hi": hi},
    ).first()
    if waiting is None:
        conn.execute(
            text(f"CREATE TABLE {name} PARTITION OF reports FOR VALUES FROM ({lo}) TO ({hi})")
        )
        return
    # the default partition holds reports of this day: they move into its new partition
    # (PostgreSQL refuses a partition whose rows the default partition holds)
    conn.execute(text(f"CREATE TABLE {name} (LIKE reports INCLUDING DEFAULTS)"))
    conn.execute(
        text(
            f"WITH moved AS (DELETE FROM {DEFAULT} WHERE created_ms >= {lo} "
            f"AND created_ms < {hi} RETURNING *) INSERT INTO {name} SELECT * FROM moved"
        )
    )
    conn.execute(
        text(f"ALTER TABLE reports ATTACH PARTITION {name} FOR VALUES FROM ({lo}) TO ({hi})")
    )


def ensure(conn: Connection, now_ms: int, ahead: int = AHEAD) -> list[str]:
    """Make the partitions of the day of ``now_ms`` and the ``ahead`` days after it, inside
    the caller's transaction; returns those made (none: nothing locked, one catalog read)."""
    first = now_ms // DAY_MS
    wanted = [first + k for k in range(ahead + 1)]
    have = attached(conn)
    if all(day_name(d) in have for d in wanted):
        return []
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK})
    have = attached(conn)  # another writer may have made them meanwhile
    made = []
    for d in wanted:
        if day_name(d) not in have:
            _create(conn, d)
            made.append(day_name(d))
    return made


def ready(conn: Connection, now_ms: int) -> None:
    """:func:`ensure` at most once a UTC day on each pooled connection (the writers' path: a
    dictionary look-up otherwise). Should the transaction roll back, the default partition
    still takes the day's reports, and the next day's check makes the partitions."""
    day = now_ms // DAY_MS
    if conn.info.get(_READY) == day:
        return
    ensure(conn, now_ms)
    conn.info[_READY] = day


def _detached(conn: Connection) -> list[str]:
    """Day tables left detached by a pass that stopped before dropping them."""
    rows = conn.execute(
        text(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
            "AND c.relname LIKE 'reports\\_d%' AND NOT c.relispartition"
        )
    )
    return [str(r) for r in rows.scalars() if _NAME.match(str(r))]


def _detach(engine: Engine, name: str) -> bool:
    """Detach partition ``name`` unless a report of it waits in ``report_inbox`` or the lock
    is not had within :data:`LOCK_WAIT`; whether it was."""
    try:
        with engine.begin() as conn:
            # the exclusive lock first: no report lands in the partition between the check and
            # the detach, and no lock is upgraded (a writer holds ``reports`` from the start of
            # its statement); waited for a bounded time, since the writers queue behind it
            conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'"))
            conn.execute(text("LOCK TABLE reports IN ACCESS EXCLUSIVE MODE"))
            if name not in attached(conn):
                return False
            waiting = conn.execute(
                text(f"SELECT 1 FROM report_inbox i JOIN {name} p ON p.seq = i.seq LIMIT 1")
            ).first()
            if waiting is not None:
                return False
            conn.execute(text(f"ALTER TABLE reports DETACH PARTITION {name}"))
            return True
    except OperationalError as exc:  # the lock not had in time (a long read): the next pass
        if getattr(exc.orig, "sqlstate", None) != "55P03":
            raise
        log.warning("retention: %s not detached, %s: the next pass tries again", name, exc.orig)
        return False


def drop_before(engine: Engine, before_ms: int) -> tuple[int, int]:
    """Drop every partition whose day ends at or before ``before_ms`` (a partition with a
    report still in ``report_inbox``, or whose lock was not had in time, waits for the next
    pass), with its reports' refusals and keys; returns how many reports went, and the first
    millisecond of the oldest partition left for the next pass (``before_ms`` when none)."""
    with engine.begin() as conn:
        old = sorted(
            n
            for n in attached(conn)
            if (d := _day(n)) is not None and (d + 1) * DAY_MS <= before_ms
        )
        leftovers = _detached(conn)
    left = before_ms
    for name in old:
        if _detach(engine, name):
            leftovers.append(name)
        else:
            left = min(left, int(_day(name) or 0) * DAY_MS)
    total = 0
    for name in sorted(set(leftovers)):
        with engine.begin() as conn:
            conn.execute(
                text(f"DELETE FROM report_refusals f USING {name} p WHERE f.report_seq = p.seq")
            )
        with engine.begin() as conn:
            got = conn.execute(text(f"DELETE FROM report_keys k USING {name} p WHERE k.id = p.id"))
            total += got.rowcount
        with engine.begin() as conn:
            conn.execute(text(f"DROP TABLE {name}"))
    return total, left
