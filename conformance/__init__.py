"""The conformance corpus: dispatch vectors, bundled parameter sets, sample envelopes and the
demo weights, located relative to this package so an installed copy finds them too."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent


def dispatch_vectors_dir() -> Path:
    return ROOT / "dispatch"


def sets_dir() -> Path:
    """Bundled parameter sets, one directory each (installed into the store on first use)."""
    return ROOT / "sets"


def envelopes_dir() -> Path:
    """Sample envelopes for the bundled sets (``wai-dispatch demo`` decodes them)."""
    return ROOT / "envelopes"


def weights_dir() -> Path:
    """The checkpoints the bundled sets were written from."""
    return ROOT / "weights"
