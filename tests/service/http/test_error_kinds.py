"""Issue 35, item 1: errors by kind. A throwaway error class of each kind, defined here and in no
table, answers its kind's HTTP status through the real application's exception handlers
(Starlette's lookup by class) and exits the CLI with its kind's exit status; a busy or
unavailable error carries its ``Retry-After``."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from wai_dispatch.cli.run import report
from wai_dispatch.dispatch import errors
from wai_dispatch.service.http.app import create_app
from wai_dispatch.service.settings import Settings
from wai_dispatch.tools.error_registry import is_registered

#: Each kind, the status the service answers it with and the exit status of the CLI.
EXPECTED = [
    (errors.InvalidInput, 422, 2),
    (errors.Malformed, 400, 2),
    (errors.TooLarge, 413, 2),
    (errors.NotFound, 404, 2),
    (errors.Forbidden, 403, 2),
    (errors.Conflict, 409, 2),
    (errors.Busy, 429, 3),
    (errors.Unavailable, 503, 3),
    (errors.Internal, 500, 2),
]


def _throwaway(kind: type[errors.WaiError]) -> type[errors.WaiError]:
    """A new error class of ``kind``, with a code no table names."""
    code = f"throwaway_{kind.__name__.lower()}"
    return type(f"Throwaway{kind.__name__}", (kind,), {"code": code, "__doc__": "a test's"})


Client = Callable[..., httpx.Response]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Client:
    """GET into the real app in process (no server, no lifespan), with a route that raises."""
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("data") / "d", warm=False))

    @app.get("/_kind/{name}")
    def raise_kind(name: str, retry: int | None = None) -> None:
        kind = getattr(errors, name)
        error = _throwaway(kind)
        raise error("raised", retry_after_s=retry) if retry else error("raised")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)

    def get(url: str, **kwargs: object) -> httpx.Response:
        async def go() -> httpx.Response:
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return await c.get(url, **kwargs)  # type: ignore[arg-type]

        return asyncio.run(go())

    return get


def test_every_kind_is_covered() -> None:
    assert {kind for kind, _, _ in EXPECTED} == set(errors.KINDS)


@pytest.mark.parametrize(("kind", "status", "exit"), EXPECTED)
def test_a_new_class_of_a_kind_gets_its_status_and_exit(
    client: Client, kind: type[errors.WaiError], status: int, exit: int
) -> None:
    answer = client(f"/_kind/{kind.__name__}")
    code = f"throwaway_{kind.__name__.lower()}"
    assert answer.status_code == status, answer.text
    assert answer.json()["error"] == {"code": code, "message": "raised"}
    assert "retry-after" not in answer.headers
    assert not is_registered(code)  # no table knows it
    assert report(_throwaway(kind)("raised"), argparse.Namespace(json=True)) == exit


@pytest.mark.parametrize("kind", [errors.Busy, errors.Unavailable])
def test_retry_after_is_an_attribute_of_busy_and_unavailable(
    client: Client, kind: type[errors.WaiError]
) -> None:
    answer = client(f"/_kind/{kind.__name__}", params={"retry": 9})
    assert answer.headers["retry-after"] == "9", answer.headers


def test_the_cli_prints_a_kinds_error_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    error = _throwaway(errors.Unavailable)("the thing does not answer")
    assert report(error, argparse.Namespace()) == 3
    err = capsys.readouterr().err
    assert err == "wai-dispatch: error: throwaway_unavailable: the thing does not answer\n"


def test_no_http_module_maps_codes_to_statuses() -> None:
    """Acceptance: no dict in service/http maps error codes to statuses (the statuses are the
    kinds' and the HTTP layer's own classes', looked up by class)."""
    root = Path(__file__).resolve().parents[3] / "service" / "http"
    assert not (root / "statuses.py").exists()
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert '"queue_full":' not in text and '"envelope_malformed":' not in text, path
