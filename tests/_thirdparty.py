"""A skip for a missing third-party package, and for nothing else (tests/project/test_skip_rule.py).

:func:`import_or_skip` runs a loader (an ``import``, or one of the project's own helpers such as
``tools._compressai.import_compressai``) and skips the test module only when it fails with an
``ImportError`` whose missing module is one of the named third-party packages (``exc.name``,
its top-level name). Any other failure, an ``ImportError`` of one of our own modules or of a
package not named, and every other exception the project's code raises (a ``TypeError`` in a
helper, say), propagates: the module fails to collect, and the run fails, never "skipped".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def missing_package(exc: ImportError) -> str:
    """The top-level name of the module an ``ImportError`` says is missing ('' if none)."""
    return (exc.name or "").split(".")[0]


def import_or_skip(load: Callable[[], T], *packages: str, reason: str) -> T:
    """``load()``'s result; a module-level skip when it fails because one of ``packages`` (a
    third-party package, never ``wai_dispatch``) cannot be imported."""
    assert packages and "wai_dispatch" not in packages, "name the third-party packages"
    try:
        return load()
    except ImportError as exc:
        if missing_package(exc) in packages:
            pytest.skip(f"{reason}: {exc}", allow_module_level=True)
        raise
