"""The adapter protocol: what :func:`dispatch.choose` asks of a path (§4), and a scripted
adapter for tests.

An adapter answers §4's device questions for one path, in §4's order, then runs the networks.
``job`` is whatever the caller decodes (a latent and a parameter set, in ``paths/``); the core
never looks inside it, so it stays pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .errors import InvalidOffer
from .offer import DispatchPath
from .report import Placement


class BackendFailed(Exception):
    """Raised by an adapter when its backend fails a decode (§4: ``dispatch_backend_failed``).
    Keep the backend's own exception as ``__cause__``."""


@runtime_checkable
class Adapter(Protocol):
    """One path's answers to §4. Each method may raise :class:`BackendFailed`."""

    @property
    def path(self) -> DispatchPath: ...

    def unit_present(self) -> bool:
        """Is the unit there, and the backend with it? (``dispatch_unit_absent``)"""
        ...

    def absent_reason(self) -> str | None:
        """Why the unit or its backend is absent, in the adapter's own words for a person;
        ``None`` when it is present. Never raises."""
        ...

    def program_present(self, job: Any) -> bool:
        """Does the parameter set hold a program for this backend? (``dispatch_program_absent``)"""
        ...

    def takes_shape(self, job: Any) -> bool:
        """Does that program take this payload's shape? (``dispatch_shape_mismatch``)"""
        ...

    def plan(self, job: Any) -> Placement | None:
        """The backend's placement of the program's operations, constants left out, or
        ``None`` where the backend states no plan (§5)."""
        ...

    def run(self, job: Any) -> Any:
        """Run the networks; the result is the decode's output."""
        ...


@dataclass
class ScriptedAdapter:
    """An adapter whose answers are chosen in advance, for testing the core and the service
    without any runtime. ``output`` is what :meth:`run` returns; ``fails`` makes it raise
    :class:`BackendFailed`. ``calls`` records the questions asked, in order."""

    path: DispatchPath
    unit: bool = True
    program: bool = True
    shape: bool = True
    placement: Placement | None = None
    fails: bool = False
    output: Any = None
    reason: str = "scripted: the unit is absent"
    calls: list[str] = field(default_factory=list)

    def unit_present(self) -> bool:
        self.calls.append("unit_present")
        return self.unit

    def absent_reason(self) -> str | None:
        return None if self.unit else self.reason

    def program_present(self, job: Any) -> bool:
        self.calls.append("program_present")
        return self.program

    def takes_shape(self, job: Any) -> bool:
        self.calls.append("takes_shape")
        return self.shape

    def plan(self, job: Any) -> Placement | None:
        self.calls.append("plan")
        return self.placement

    def run(self, job: Any) -> Any:
        self.calls.append("run")
        if self.fails:
            raise BackendFailed(f"scripted failure on {self.path}")
        return self.output

    @classmethod
    def from_json(cls, path: DispatchPath, obj: Mapping[str, Any]) -> ScriptedAdapter:
        """Answers as the conformance vectors write them (conformance/dispatch/README.md)."""
        placement = obj.get("plan")
        run = obj.get("run", "ok")
        if run not in ("ok", "fail") or not isinstance(run, str):
            raise InvalidOffer(f'{path}: run is "ok" or "fail", not {run!r}')
        return cls(
            path,
            unit=_answer(obj, "unit_present", path),
            program=_answer(obj, "program_present", path),
            shape=_answer(obj, "takes_shape", path),
            placement=None if placement is None else Placement.from_json(placement),
            fails=run == "fail",
            output=obj.get("output"),
        )


def _answer(obj: Mapping[str, Any], key: str, path: DispatchPath) -> bool:
    """A scripted yes/no answer: a JSON boolean (the string "false" is not true)."""
    value = obj.get(key, True)
    if not isinstance(value, bool):
        raise InvalidOffer(f"{path}: {key} is true or false, not {value!r}")
    return value
