"""The operator dashboard: one static page (``index.html``, ``dashboard.js``,
``dashboard.css``) and the chart library it draws with, vendored under ``vendor/`` (uPlot, MIT;
THIRD_PARTY.md). No build step and no CDN: the service serves these files as they are."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable


def files() -> Traversable:
    """The dashboard's folder inside the installed package."""
    return resources.files(__package__)
