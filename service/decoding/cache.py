"""The program cache: built programs (ONNX Runtime sessions, compiled Core ML models) per
(set digest, path), least recently used out first under a byte budget, with hit, miss and
eviction counters for ``/metrics``.

An adapter keeps its programs in a mapping it owns; :meth:`ProgramCache.view` is such a mapping
for one path (the subset of ``OrderedDict`` the adapters use), backed by this one cache, so
every path's programs share the one budget. A program's bytes are estimated by ``sizer`` from
the set's manifest (the program's files, held about twice: the bytes and the built session).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

Key = tuple[str, str]  # (set digest, path)


class ProgramCache:
    def __init__(self, budget_bytes: int, sizer: Callable[[str, str], int]) -> None:
        self.budget = budget_bytes
        self.sizer = sizer
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.bytes = 0
        self._items: OrderedDict[Key, tuple[Any, int]] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, key: Key) -> Any:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self.hits += 1
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Key, value: Any) -> None:
        size = max(0, int(self.sizer(*key)))
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._items[key] = (value, size)
            self.bytes += size
            while self.bytes > self.budget and len(self._items) > 1:
                _, (_, freed) = self._items.popitem(last=False)
                self.bytes -= freed
                self.evictions += 1

    def entries(self) -> list[Key]:
        with self._lock:
            return list(self._items)

    def view(self, path: str) -> PathView:
        return PathView(self, path)


class PathView:
    """One path's programs, keyed by set digest, as an adapter's ``_cache`` reads them."""

    def __init__(self, cache: ProgramCache, path: str) -> None:
        self.cache = cache
        self.path = path

    def get(self, digest: str, default: Any = None) -> Any:
        value = self.cache.get((digest, self.path))
        return default if value is None else value

    def __setitem__(self, digest: str, value: Any) -> None:
        self.cache.put((digest, self.path), value)

    def move_to_end(self, digest: str) -> None:
        """Recency is kept by :meth:`get`."""

    def __len__(self) -> int:
        return 0  # the budget, not a count, bounds the cache: an adapter's count check passes

    def popitem(self, last: bool = True) -> tuple[str, Any]:
        raise KeyError("the program cache evicts by bytes")

    def values(self) -> list[Any]:
        return [self.cache.get(k) for k in self.cache.entries() if k[1] == self.path]

    def clear(self) -> None:
        with self.cache._lock:
            for key in [k for k in self.cache.entries() if k[1] == self.path]:
                _, size = self.cache._items.pop(key)
                self.cache.bytes -= size

    def __iter__(self) -> Iterator[str]:
        return iter([k[0] for k in self.cache.entries() if k[1] == self.path])
