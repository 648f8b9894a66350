"""Issue 16: no response body names a server path or carries a stack trace — checked on every
error answer the suite provokes, not on a list of them.

:func:`install` (run once per test session by tests/conftest.py) gives every ``httpx.Client``
and ``httpx.AsyncClient`` made while the suite runs — the fixtures' (``app_client``,
``app_service``, ``live_service``, tests/_svc.py's), a test's own, ``httpx.get`` — a response
hook: an answer with status >= 400 whose body holds one of :func:`forms` (the repository root,
the temporary folder where every test's data directory lives, ``site-packages``, the home
directory, ``Traceback``) fails the request with an ``AssertionError``, unless the request itself
carried that text (an echo of the client's own input is not a leak). Each finding is also kept,
so a test whose code swallows the error still fails (tests/conftest.py checks after each test).
"""

from __future__ import annotations

import site
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: What was found since the current test started (tests/conftest.py empties it).
FOUND: list[str] = []


def forms() -> set[str]:
    """The texts no error body may hold."""
    out = {str(ROOT), "site-packages", "Traceback", str(Path.home()), "/tmp/"}
    out.add(tempfile.gettempdir().rstrip("/") + "/")
    out.update(p for p in [sys.prefix, *site.getsitepackages()] if p and p != "/")
    return {form for form in out if len(form) > 4}  # never "/" or "/usr"


FORMS = frozenset(forms())


def _sent(request: httpx.Request) -> str:
    """What the client sent: the URL (also percent-decoded) and the body where it was bytes."""
    url = str(request.url)
    try:
        body = request.content.decode("utf-8", "replace")
    except httpx.RequestNotRead:  # a streamed body: not kept
        body = ""
    return f"{url}\n{unquote(url)}\n{body}\n{request.headers!r}"


def leaks(response: httpx.Response) -> list[str]:
    """The forms an error answer's body holds that its request did not."""
    if response.status_code < 400:
        return []
    text = response.content.decode("utf-8", "replace")
    sent = _sent(response.request)
    return sorted(form for form in FORMS if form in text and form not in sent)


def _fail_on(response: httpx.Response) -> None:
    found = leaks(response)
    if found:
        what = f"{response.request.method} {response.request.url} -> {response.status_code}"
        FOUND.append(f"{what}: {found}: {response.text[:300]}")
        raise AssertionError(f"an error answer names {found}: {what}: {response.text[:300]}")


def _sync_hook(response: httpx.Response) -> None:
    response.read()
    _fail_on(response)


async def _async_hook(response: httpx.Response) -> None:
    await response.aread()
    _fail_on(response)


def _with_hook(init: Callable[..., None], hook: Callable[..., Any]) -> Callable[..., None]:
    def patched(self: Any, *args: Any, **kwargs: Any) -> None:
        hooks = dict(kwargs.pop("event_hooks", None) or {})
        hooks["response"] = [*hooks.get("response", []), hook]
        init(self, *args, event_hooks=hooks, **kwargs)

    return patched


@contextmanager
def install() -> Iterator[None]:
    """Every httpx client made inside the block checks its error answers."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(httpx.Client, "__init__", _with_hook(httpx.Client.__init__, _sync_hook))
        mp.setattr(
            httpx.AsyncClient, "__init__", _with_hook(httpx.AsyncClient.__init__, _async_hook)
        )
        yield
