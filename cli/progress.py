"""Progress on long work (``verify``, ``make-set``): a bar on standard error when it is a
terminal, nothing otherwise (a pipe, a file, CI's log). Drawn here, on one line rewritten in
place, rather than with ``rich`` or ``tqdm``: neither is a dependency of the base install."""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

WIDTH = 24
TICK_S = 0.25


def on_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


class Bar:
    """``label [#####.....] done/total  12 s  note`` on one line of a terminal; every method
    does nothing when the stream is no terminal."""

    def __init__(self, label: str, total: int | None, stream: TextIO) -> None:
        self.label, self.total, self.stream = label, total, stream
        self.enabled = on_tty(stream)
        self.done = 0
        self.note = ""
        self.start = time.monotonic()
        self._lock = threading.Lock()

    def update(self, done: int, total: int | None = None, note: str = "") -> None:
        with self._lock:
            self.done, self.note = done, note
            if total is not None:
                self.total = total
        self.draw()

    def line(self) -> str:
        took = f"{time.monotonic() - self.start:4.0f} s"
        if self.total:
            filled = min(WIDTH, WIDTH * self.done // self.total)
            bar = f"[{'#' * filled}{'.' * (WIDTH - filled)}] {self.done}/{self.total}"
        else:
            spin = "|/-\\"[int((time.monotonic() - self.start) / TICK_S) % 4]
            bar = f"{spin}"
        return f"{self.label} {bar}  {took}  {self.note}"[:120]

    def draw(self) -> None:
        if self.enabled:
            with self._lock:
                self.stream.write(f"\r{self.line()}\x1b[K")
                self.stream.flush()

    def clear(self) -> None:
        if self.enabled:
            with self._lock:
                self.stream.write("\r\x1b[K")
                self.stream.flush()


@contextlib.contextmanager
def bar(label: str, total: int | None = None, stream: TextIO | None = None) -> Iterator[Bar]:
    """A :class:`Bar` on ``stream`` (default standard error) for the block; cleared after."""
    shown = Bar(label, total, sys.stderr if stream is None else stream)
    shown.draw()
    try:
        yield shown
    finally:
        shown.clear()


class _Above(io.TextIOBase):
    """Standard error while a spinner runs: each line written goes above the spinner's line."""

    def __init__(self, shown: Bar, under: TextIO) -> None:
        self.shown, self.under = shown, under

    def write(self, text: str) -> int:
        with self.shown._lock:
            self.under.write(f"\r\x1b[K{text}")
            self.under.flush()
        if text.endswith("\n"):
            self.shown.draw()
        return len(text)

    def flush(self) -> None:
        self.under.flush()


@contextlib.contextmanager
def spinner(label: str) -> Iterator[Bar]:
    """Work of unknown length: on a terminal, a line with the time taken, redrawn every
    quarter second, the work's own stderr lines printed above it; elsewhere nothing at all
    (the work's lines pass through as they are)."""
    under = sys.stderr
    shown = Bar(label, None, under)
    if not shown.enabled:
        yield shown
        return
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(TICK_S):
            shown.draw()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        with contextlib.redirect_stderr(_Above(shown, under)):
            yield shown
    finally:
        stop.set()
        ticker.join()
        shown.clear()
