"""The ``slow`` marker kept honest: under CI (``CI`` set to anything but ``""``, ``0`` or
``false``), a test whose call took over :data:`LIMIT_S` seconds without carrying the ``slow``
marker fails the session, which lists each such test (tests/conftest.py registers this plugin;
``WAI_SLOW_LIMIT_S`` moves the limit, ``WAI_SLOW_CHECK=0`` turns the check off).

What counts, so that a loaded machine does not fail a quick test and two threads do not fail a
short one: a call's time is the *smaller* of its wall time and the CPU time it used (this
process's, plus that of the child processes it waited for). Another program's load stretches
the wall time but not the CPU time; a test on two threads doubles its CPU time but not its wall
time; a test that only waits (on a subprocess it then reaps, on a server thread of this process)
still counts the work done for it. Only the call phase is timed: a fixture's set-up is shared.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Generator

import pytest

LIMIT_S = 5.0


def enabled(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether this run checks the marker: CI's, unless ``WAI_SLOW_CHECK=0``."""

    def on(name: str) -> bool:
        return environ.get(name, "").strip().lower() not in ("", "0", "false", "no")

    return on("CI") and environ.get("WAI_SLOW_CHECK", "1").strip() not in ("0", "false")


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class SlowCheck:
    """The pytest plugin: times each test's call, and fails the session at its end."""

    def __init__(self, limit_s: float = LIMIT_S) -> None:
        self.limit_s = limit_s
        self.over: list[tuple[str, float, float]] = []  # (test, wall s, cpu s)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        wall, cpu = time.perf_counter(), _cpu_s()
        yield
        wall, cpu = time.perf_counter() - wall, _cpu_s() - cpu
        if min(wall, cpu) > self.limit_s and item.get_closest_marker("slow") is None:
            self.over.append((item.nodeid, wall, cpu))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.over and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.over:
            return
        terminalreporter.section("unmarked slow tests", sep="=", red=True, bold=True)
        terminalreporter.line(
            f"{len(self.over)} test(s) took over {self.limit_s:g} s (the smaller of wall and "
            "CPU time) without @pytest.mark.slow: mark them, or make them quicker"
        )
        for nodeid, wall, cpu in self.over:
            terminalreporter.line(f"  {nodeid}  wall {wall:.1f} s, cpu {cpu:.1f} s")


def register(config: pytest.Config) -> None:
    """Register the check on ``config`` when :func:`enabled`."""
    if enabled():
        limit = float(os.environ.get("WAI_SLOW_LIMIT_S") or LIMIT_S)
        config.pluginmanager.register(SlowCheck(limit), "wai-slow-check")
