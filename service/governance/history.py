"""The model policy kept in the data directory, with its history: every version the operator
set, who set it and when (``<data_dir>/policy/v000001.json`` …, one file per version).

A version's file is written beside its final name and linked into place, so it appears whole or
not at all, and two writers never take the same version number. The policy in force is the
highest version; :meth:`PolicyHistory.in_force_at` gives the one in force at a moment.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wai_dispatch.service.governance.errors import PolicyNotSet
from wai_dispatch.service.governance.policy import Policy, load_policy

_NAME = re.compile(r"v(\d{6})\.json")


@dataclass(frozen=True, slots=True)
class PolicyVersion:
    version: int
    set_by: str
    set_ms: int  # Unix time, milliseconds
    text: str
    sha256: str

    def policy(self) -> Policy:
        return load_policy(self.text, source=f"policy v{self.version}")

    def to_json(self, *, with_text: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": self.version,
            "set_by": self.set_by,
            "set_ms": self.set_ms,
            "sha256": self.sha256,
        }
        if with_text:
            out["text"] = self.text
        return out


class PolicyHistory:
    """The versions under ``root`` (``<data_dir>/policy``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def versions(self) -> list[PolicyVersion]:
        if not self.root.is_dir():
            return []
        found = sorted(p for p in self.root.iterdir() if _NAME.fullmatch(p.name))
        return [self._read(p) for p in found]

    def current(self) -> PolicyVersion:
        versions = self.versions()
        if not versions:
            raise PolicyNotSet(f"no model policy is set in {self.root}")
        return versions[-1]

    def get(self, version: int) -> PolicyVersion:
        path = self.root / f"v{version:06d}.json"
        if not path.is_file():
            raise PolicyNotSet(f"no policy version {version} in {self.root}")
        return self._read(path)

    def in_force_at(self, ms: int) -> PolicyVersion:
        """The newest version set at or before ``ms``."""
        chosen = [v for v in self.versions() if v.set_ms <= ms]
        if not chosen:
            raise PolicyNotSet(f"no model policy was in force at {ms} ms")
        return chosen[-1]

    def set(self, text: str, *, by: str, now_ms: int | None = None) -> PolicyVersion:
        """Validate ``text`` and keep it as the next version; a bad policy raises and changes
        nothing."""
        policy = load_policy(text, source="policy")
        self.root.mkdir(parents=True, exist_ok=True)
        at = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        while True:
            versions = self.versions()
            number = versions[-1].version + 1 if versions else 1
            record = PolicyVersion(number, by, at, policy.text, policy.sha256)
            if self._publish(record):
                return record

    def _publish(self, record: PolicyVersion) -> bool:
        final = self.root / f"v{record.version:06d}.json"
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".v", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(record.to_json(), out, indent=1)
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(tmp, final)  # fails if another writer took this number
            except FileExistsError:
                return False
        finally:
            os.unlink(tmp)
        dir_fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return True

    @staticmethod
    def _read(path: Path) -> PolicyVersion:
        obj = json.loads(path.read_text(encoding="utf-8"))
        return PolicyVersion(
            int(obj["version"]), str(obj["set_by"]), int(obj["set_ms"]), obj["text"], obj["sha256"]
        )
