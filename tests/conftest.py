"""Shared test set-up: hypothesis profiles and the fixtures every folder uses.

Hypothesis: ``ci`` (selected when the environment sets ``CI``) is derandomized, so a CI run is
reproducible; ``default`` explores new examples each run.

The ``slow`` marker: under ``CI``, a test whose call takes over 5 s (the smaller of its wall and
CPU time) without ``@pytest.mark.slow`` fails the session (tests/_slowcheck.py).

Fixtures (helpers in tests/_svc.py and tests/pagekit.py):

- ``report_store``: the report store on SQLite in a temporary folder, migrated.
- ``decoder``: ``Decoder.assemble`` on a temporary data directory (the bundled sets), reference
  offer; one per test module.
- ``app_service``: the HTTP app in process (httpx's ASGITransport, its lifespan run on an anyio
  blocking portal) with tokens per role, for plain tests; ``app`` and ``app_client`` (an
  operator's ``httpx.AsyncClient`` on it) for ``async`` tests (``@pytest.mark.anyio``).
- ``live_service``: the real uvicorn on a loopback port in a thread (the end-to-end tests).
- ``browser``: Debian's Chromium through Playwright (skips without it, fails under
  ``WAI_REQUIRE_BROWSER=1`` as in CI); a factory of fresh pages.
- ``wgpu_device``: a WebGPU adapter through wgpu (tests/paths/conftest.py; Mesa's lavapipe
  counts).
- every httpx client made in the suite checks its error answers (tests/_leaks.py): a body with a
  status >= 400 that names the repository, the temporary folder (every test's data directory),
  ``site-packages``, the home directory or holds ``Traceback`` fails the test.
- the service's JSON log lines stay off the terminal: in the test process its records reach
  pytest's log capture alone (``caplog``), so a server thread's late line never lands between
  pytest's progress dots.
- ``postgres``: the admin URL of PostgreSQL (the shared server on 127.0.0.1:5432 when it answers,
  else a private cluster started once with initdb/pg_ctl; skips where neither exists);
  ``postgres_url``: a fresh database on it, dropped afterwards.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
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


def pytest_configure(config: pytest.Config) -> None:
    """Under CI, an unmarked test over 5 s fails the session (tests/_slowcheck.py)."""
    from _slowcheck import register

    register(config)


# A test that uses one of these fixtures (directly or through another fixture) carries the
# marker, so `-m browser`, `-m 'not postgres'` select exactly the tests that need the thing.
FIXTURE_MARKERS = {"browser": "browser", "postgres": "postgres", "wgpu_device": "gpu"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in names:
                item.add_marker(marker)


@pytest.fixture(scope="session", autouse=True)
def _error_answers_checked() -> Iterator[None]:
    """Every httpx client of the session gets tests/_leaks.py's response hook."""
    from _leaks import install

    with install():
        yield


@pytest.fixture(scope="session", autouse=True)
def _service_log_off_the_terminal() -> Iterator[None]:
    """The service's JSON log (service/http/logs.py) writes each line to whatever ``sys.stderr``
    is then. A server thread's line that comes after its test ended (a request's line follows
    its answer) met pytest's own terminal there, between the progress dots, where capture is
    suspended. In the test process the service's records reach pytest's log capture alone
    (``caplog``; a failed test's "Captured log"); a service started as a process logs as it is
    configured."""
    from wai_dispatch.service.http import logs

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logs._StderrHandler, "emit", lambda self, record: None)
        yield


@pytest.fixture(autouse=True)
def _no_leak_in_this_test() -> Iterator[None]:
    """A leak the hook found fails the test even where the test's code swallowed the error."""
    from _leaks import FOUND

    FOUND.clear()
    yield
    assert not FOUND, "error answers name server paths:\n" + "\n".join(FOUND)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """``async`` tests (``@pytest.mark.anyio``) run on asyncio, the loop uvicorn uses."""
    return "asyncio"


@pytest.fixture
def report_store(tmp_path: Path) -> Iterator[Any]:
    from wai_dispatch.service.store.report_store import ReportStore

    store = ReportStore(f"sqlite:///{tmp_path / 'reports.db'}")
    store.migrate()
    yield store
    store.dispose()


@pytest.fixture(scope="module")
def decoder(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from wai_dispatch.dispatch import REFERENCE_OFFER
    from wai_dispatch.service.decoding.decoder import Decoder

    return Decoder.assemble(tmp_path_factory.mktemp("data"), REFERENCE_OFFER)


@pytest.fixture
def app_service(tmp_path: Path) -> Iterator[Any]:
    from _svc import in_process

    with in_process(tmp_path / "data") as running:
        yield running


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[Any]:
    """The app for ``async`` tests, its lifespan run on the test's loop; tokens per role in
    ``app.state.test_tokens``."""
    from _svc import _prepared, lifespan_of

    made, tokens = _prepared(tmp_path / "data", 8000)
    made.state.test_tokens = tokens
    async with lifespan_of(made):
        yield made


@pytest.fixture
async def app_client(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An operator's client on ``app`` through httpx's ASGITransport."""
    token = app.state.test_tokens["operator"]
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    ) as client:
        yield client


@pytest.fixture
def live_service(tmp_path: Path) -> Iterator[Any]:
    from _svc import serve

    with serve(tmp_path / "data") as running:
        yield running


@pytest.fixture(scope="session")
def browser() -> Callable[..., Any]:
    """``browser(extra_args, init_script=None, token=None)``: a context manager giving a fresh
    page (logged in to the page with ``token``: tests/pagekit.py)."""
    from pagekit import browser_page, require_browser

    require_browser()
    return browser_page


@pytest.fixture(scope="session")
def postgres() -> str:
    from _svc import pg_admin_url

    if (url := pg_admin_url()) is None:
        pytest.skip("no PostgreSQL: nothing answers on 127.0.0.1:5432 and initdb is not installed")
    return url


@pytest.fixture
def postgres_url(postgres: str) -> Iterator[str]:
    from _svc import pg_database

    with pg_database(postgres) as url:
        yield url
