"""Shared test set-up: hypothesis profiles. ``ci`` (selected when the environment sets ``CI``)
is derandomized, so a CI run is reproducible; ``default`` explores new examples each run."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=200,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("default", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "default")
