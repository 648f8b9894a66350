"""The conformance corpus: dispatch vectors, bundled parameter sets, sample envelopes and the
demo weights, found with :mod:`importlib.resources`, so the same code works from the wheel and
from an editable install.

The demo weights (``weights/``) and the retired sets (``retired/``) are not in the wheel: only
the set writer and the tests (``tools`` extra, run from a checkout) read them, and
:func:`weights_dir` says so when they are missing.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def _folder(name: str) -> Path:
    # The package is always a plain folder (the wheel is installed unzipped; an editable
    # install maps it onto the checkout), so its resources are real paths. Resolved: in a
    # checkout, wai_dispatch/conformance is a symlink to the root folder, which users know.
    return Path(str(files(__name__).joinpath(name))).resolve()


def sets_dir() -> Path:
    """Bundled parameter sets, one directory each (installed into the store on first use)."""
    return _folder("sets")


def envelopes_dir() -> Path:
    """Sample envelopes for the bundled sets (``wai-dispatch demo`` decodes them)."""
    return _folder("envelopes")


def retired_dir() -> Path:
    """Sets a bundled set replaced, with their sample envelopes (``retired/README.md``): not
    installed on first use, kept so that tests and tools can install and compare them (a
    checkout only: not in the wheel)."""
    return _folder("retired")


def neural_conformance_dir() -> Path:
    """The integer capability's corpus: payloads and their golden hashes (its README)."""
    return _folder("neural-conformance")


def weights_dir() -> Path:
    """The checkpoints the bundled sets were written from (a checkout only: not in the wheel)."""
    path = _folder("weights")
    if not path.is_dir():
        raise FileNotFoundError(
            f"{path}: the demo weights ship with a checkout of wai-dispatch, not with the wheel"
        )
    return path
