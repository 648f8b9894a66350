"""The replica plan of the Ray Serve deployment (docs/ray.md): a fixed count, or autoscaled on
ongoing requests with the settings chosen for a burst; the store check (more than one replica
needs PostgreSQL) and the placement check (``max_replicas`` × ``num_cpus`` against the
cluster's CPUs, a warning where the cluster cannot place them all). No Ray import here.

The autoscaling defaults, each against Serve's own and why, are docs/ray.md's table.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from wai_dispatch.dispatch.errors import InvalidInput
from wai_dispatch.service.decoding.errors import SettingsInvalid
from wai_dispatch.service.settings import Settings

log = logging.getLogger("wai_dispatch.rayserve")


class PlanInvalid(SettingsInvalid):
    """A replica plan that does not hold (a count below 1, MIN over MAX, an unknown key)."""


class StoreNotShared(InvalidInput):
    """more than one replica (`serve --ray`) on a SQLite report store: a fleet shares PostgreSQL"""

    code = "store_not_shared"


@dataclass(frozen=True)
class Plan:
    """How many replicas, and what each takes: ``replicas`` fixed, or ``autoscale`` = (MIN,
    MAX) with Serve's autoscaler keeping ``target_ongoing_requests`` per replica, on the
    module's timings (``metrics_interval_s``, ``look_back_period_s``, ``upscale_delay_s``,
    ``downscale_delay_s``); ``replica_cpus`` (Ray's ``num_cpus`` of each replica, and its
    decode threads); ``max_ongoing_requests`` a replica is sent at once (more wait in Serve's
    queue)."""

    replicas: int = 1
    autoscale: tuple[int, int] | None = None
    target_ongoing_requests: float = 2.0
    replica_cpus: float = 1.0
    max_ongoing_requests: int = 16
    metrics_interval_s: float = 1.0
    look_back_period_s: float = 5.0
    upscale_delay_s: float = 3.0
    downscale_delay_s: float = 60.0

    def __post_init__(self) -> None:
        problems = []
        if self.replicas < 1:
            problems.append(f"replicas: {self.replicas}, at least 1")
        if self.autoscale is not None:
            low, high = self.autoscale
            if low < 0 or high < 1 or low > high:
                problems.append(f"autoscale: {low}:{high}, 0 <= MIN <= MAX and MAX >= 1")
        if not self.target_ongoing_requests > 0:
            problems.append("target_ongoing_requests: above 0")
        if not 0 < self.replica_cpus <= 256:
            problems.append("replica_cpus: above 0, at most 256")
        if self.max_ongoing_requests < 1:
            problems.append("max_ongoing_requests: at least 1")
        for name in ("metrics_interval_s", "look_back_period_s"):
            if not getattr(self, name) > 0:
                problems.append(f"{name}: above 0")
        for name in ("upscale_delay_s", "downscale_delay_s"):
            if not getattr(self, name) >= 0:
                problems.append(f"{name}: 0 or more")
        if problems:
            raise PlanInvalid("; ".join(problems))

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Plan:
        """The plan of ``serve run``'s ``args`` (or the CLI's): the field names, ``autoscale``
        as ``"MIN:MAX"`` or a pair."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(args) - known)
        if unknown:
            raise PlanInvalid(
                f"unknown argument(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        given = dict(args)
        scale = given.get("autoscale")
        if isinstance(scale, str):
            low, sep, high = scale.partition(":")
            if not (sep and low.strip().isdigit() and high.strip().isdigit()):
                raise PlanInvalid(f"autoscale: {scale!r}, MIN:MAX (two counts)")
            given["autoscale"] = (int(low), int(high))
        elif scale is not None:
            given["autoscale"] = (int(scale[0]), int(scale[1]))
        try:
            return cls(**given)
        except (TypeError, ValueError) as exc:
            raise PlanInvalid(str(exc)) from None

    @property
    def most(self) -> int:
        """The most replicas the plan may run at once."""
        return self.autoscale[1] if self.autoscale else self.replicas

    def threads(self) -> int:
        return max(1, math.ceil(self.replica_cpus))

    def options(self) -> dict[str, Any]:
        """The deployment's options (``serve.deployment(**options)``), runtime env aside."""
        scale: dict[str, Any]
        if self.autoscale is None:
            scale = {"num_replicas": self.replicas}
        else:
            scale = {
                "autoscaling_config": {
                    "min_replicas": self.autoscale[0],
                    "max_replicas": self.autoscale[1],
                    "target_ongoing_requests": self.target_ongoing_requests,
                    "metrics_interval_s": self.metrics_interval_s,
                    "look_back_period_s": self.look_back_period_s,
                    "upscale_delay_s": self.upscale_delay_s,
                    "downscale_delay_s": self.downscale_delay_s,
                }
            }
        return {
            **scale,
            "max_ongoing_requests": self.max_ongoing_requests,
            "ray_actor_options": {"num_cpus": self.replica_cpus},
        }

    def to_args(self) -> dict[str, Any]:
        out = asdict(self)
        if self.autoscale is not None:
            out["autoscale"] = f"{self.autoscale[0]}:{self.autoscale[1]}"
        return out


def check_store(settings: Settings, plan: Plan) -> None:
    """Refuse a plan of more than one replica on SQLite (:class:`StoreNotShared`)."""
    if plan.most > 1 and settings.url.startswith("sqlite"):
        raise StoreNotShared(
            f"{plan.most} replicas on the SQLite report store {settings.url}: a fleet shares "
            "PostgreSQL (WAI_DATABASE_URL=postgresql://…); one replica may use SQLite",
        )


def placement_problem(plan: Plan, cluster_cpus: float) -> str | None:
    """Why the cluster's ``cluster_cpus`` cannot place the plan's most replicas at
    ``replica_cpus`` each (``None``: they fit). Serve keeps a replica it cannot place pending
    and the deployment UPSCALING, so the excess never serves."""
    need = plan.most * plan.replica_cpus
    if need <= cluster_cpus + 1e-9:
        return None
    fits = math.floor((cluster_cpus + 1e-9) / plan.replica_cpus)
    what = "max_replicas" if plan.autoscale else "replicas"
    return (
        f"{what} {plan.most} × num_cpus {plan.replica_cpus:g} = {need:g} CPUs, and the cluster "
        f"has {cluster_cpus:g}: {fits} replica(s) can be placed, the rest stay pending (the "
        f"deployment stays {'UPSCALING' if plan.autoscale else 'DEPLOYING'}); lower "
        f"{what} or --replica-cpus, or add nodes"
    )


def warn_unplaceable(plan: Plan) -> str | None:
    """:func:`placement_problem` against the connected cluster's CPUs now
    (``ray.cluster_resources()``), logged as a warning; nothing when Ray is not connected."""
    import ray  # the ray extra (callers have it)

    if not ray.is_initialized():
        return None
    # Ray's function has no annotations (typed here, so that the call checks with or without
    # the extra installed)
    resources: Callable[[], dict[str, float]] = ray.cluster_resources
    problem = placement_problem(plan, float(resources().get("CPU", 0.0)))
    if problem is not None:
        log.warning("%s", problem, extra={"replicas": plan.most, "num_cpus": plan.replica_cpus})
    return problem
