"""The one least-recently-used cache of the project: a byte budget (and, where a count is the
better bound, a number of entries), with hit, miss and eviction counters; thread-safe.

A put over the budget evicts the least recently used entries until the rest fits; the entry
just put always stays, even alone over the budget (a program that is used must be held).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: The default byte budget of a program cache (``program_cache_bytes``: 512 MiB).
DEFAULT_PROGRAM_BYTES = 512 * 1024 * 1024


class LRU(Generic[K, V]):
    """Entries by key, least recently used out first once ``budget_bytes`` (``None``: no byte
    bound) or ``max_entries`` (``None``: no count bound) is passed."""

    def __init__(self, budget_bytes: int | None = None, *, max_entries: int | None = None):
        if budget_bytes is not None and budget_bytes < 0:
            raise ValueError(f"budget_bytes must be >= 0, not {budget_bytes}")
        if max_entries is not None and max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, not {max_entries}")
        self.budget_bytes = budget_bytes
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._bytes = 0
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """The bytes the entries held are counted for (as each was put)."""
        return self._bytes

    def get(self, key: K) -> V | None:
        """The entry (now the most recent), or ``None``; counts a hit or a miss."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self.hits += 1
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: K, value: V, nbytes: int = 0) -> None:
        """Keep ``value`` under ``key`` (replacing any), counted as ``nbytes``; evict the least
        recent entries past the bounds (never this one)."""
        size = max(0, int(nbytes))
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (value, size)
            self._bytes += size
            while len(self._items) > 1 and self._over():
                _, (_, freed) = self._items.popitem(last=False)
                self._bytes -= freed
                self.evictions += 1

    def _over(self) -> bool:
        return (self.budget_bytes is not None and self._bytes > self.budget_bytes) or (
            self.max_entries is not None and len(self._items) > self.max_entries
        )

    def pop(self, key: K) -> V | None:
        """Remove ``key``'s entry and return it (``None`` when there is none); not counted."""
        with self._lock:
            item = self._items.pop(key, None)
            if item is None:
                return None
            self._bytes -= item[1]
            return item[0]

    def clear(self) -> None:
        """Remove every entry (the counters stay)."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def entries(self) -> list[K]:
        """The keys, least recent first (a snapshot; recency unchanged)."""
        with self._lock:
            return list(self._items)

    def values(self) -> list[V]:
        """The values, least recent first (a snapshot; recency unchanged)."""
        with self._lock:
            return [value for value, _ in self._items.values()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items


#: Built programs of every path, by ``(path, set digest)``: an ONNX Runtime session, a loaded
#: wai-ops program, a compiled Core ML model, a WGSL program's weights.
Programs = LRU[tuple[str, str], object]


def program_bytes(files: Iterable[bytes]) -> int:
    """A program's bytes, as the program cache counts them: its files' bytes, held about twice
    (the bytes read from the set, and the program built from them)."""
    return 2 * sum(len(data) for data in files)
