"""The sink's client's retry policy (:mod:`cli.remote`): which answers are worth another
attempt, how long to wait before it (exponential backoff with equal jitter), and the service's
``Retry-After`` (seconds or an HTTP date), capped. Standard library only, as the client is."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

#: Statuses worth another attempt: the service is busy or a proxy lost it for a moment.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
RETRY_AFTER_CAP_S = 60.0


def _uniform() -> float:
    """A uniform draw in [0, 1) for the jitter (the ``random`` module costs ~3 ms to load)."""
    return int.from_bytes(os.urandom(4), "big") / 2**32


def backoff(attempt: int, rng: Callable[[], float] = _uniform) -> float:
    """Seconds before retry ``attempt`` (0, 1, …): the exponential step ``BASE·2^attempt``
    capped at ``CAP``, half of it fixed and half drawn at random ("equal jitter"), so that
    sinks that failed together do not come back together, and never sooner than half."""
    step = min(BACKOFF_CAP_S, BACKOFF_BASE_S * float(2**attempt))
    return step / 2 + rng() * step / 2


MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(text: str) -> float | None:
    """Seconds since the epoch of an IMF-fixdate (``Sun, 06 Nov 1994 08:49:37 GMT``, the form
    RFC 9110 has senders use); ``None`` for anything else."""
    parts = text.replace(":", " ").split()
    if len(parts) != 8 or parts[7] != "GMT" or parts[2] not in MONTHS:
        return None
    try:
        day, year, hour, minute, second = (int(parts[i]) for i in (1, 3, 4, 5, 6))
    except ValueError:
        return None
    month = MONTHS.index(parts[2]) + 1
    # days from the civil date (Howard Hinnant's algorithm), proleptic Gregorian
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    return float(days * 86400 + hour * 3600 + minute * 60 + second)


def retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """A ``Retry-After`` header's seconds (delta-seconds, or an HTTP date: :func:`http_date`),
    capped; ``None`` when absent or unreadable. ``now``: seconds since the epoch."""
    if not value:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return min(float(text), RETRY_AFTER_CAP_S)
    when = http_date(text)
    if when is None:
        return None
    return min(max(0.0, when - now()), RETRY_AFTER_CAP_S)
