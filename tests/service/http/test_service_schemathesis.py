"""Property-based tests of the published OpenAPI schema against the live service
(schemathesis): whatever a client sends to any operation, with any role's token (sink, operator,
admin), the answer is never a 5xx; and a stateful run (the links schemathesis finds, e.g. a
report list to one report) per role. Kept short for CI (``WAI_SCHEMATHESIS_EXAMPLES`` examples
per operation and role, default 25; stateful: as many scenarios of up to 10 steps)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from _svc import Live, serve
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

EXAMPLES = int(os.environ.get("WAI_SCHEMATHESIS_EXAMPLES", "25"))
ROLES = ("sink", "operator", "admin")
FAST = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@schemathesis.serializer(
    "application/x-tar", "application/gzip", "application/x-gzip", "application/zip"
)
def _archive(ctx: Any, value: Any) -> bytes:
    """Set archives are opaque bytes: send what was generated as bytes."""
    return value if isinstance(value, bytes) else str(value).encode()


def _schema() -> Any:
    """The schema the service publishes (built from the app; nothing needs to run)."""
    from wai_dispatch.service.decoding.settings import Settings
    from wai_dispatch.service.http.app import create_app

    app = create_app(Settings(data_dir=Path("/nonexistent")))
    return schemathesis.openapi.from_dict(app.openapi())


SCHEMA = _schema()
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with serve(tmp_path_factory.mktemp("schemathesis")) as running:
        yield running


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("operation", OPERATIONS, ids=[op.label for op in OPERATIONS])
def test_no_operation_answers_5xx(operation: Any, role: str, live: Live) -> None:
    auth = {"Authorization": f"Bearer {live.tokens[role]}"}
    seen: list[int] = []

    @given(case=operation.as_strategy())
    @FAST
    def run(case: Any) -> None:
        response = case.call_and_validate(
            base_url=live.url, headers=auth, checks=[not_a_server_error]
        )
        seen.append(response.status_code)

    run()
    assert seen and max(seen) < 500


@pytest.mark.parametrize("role", ROLES)
def test_stateful_no_5xx(role: str, live: Live) -> None:
    """Scenarios along the links schemathesis infers from the schema (a list to its items),
    each step checked for a server error only (the schema's other checks have their tests)."""
    auth = {"Authorization": f"Bearer {live.tokens[role]}"}
    statuses: list[int] = []

    class Workflow(SCHEMA.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": live.url, "headers": auth}

        def validate_response(
            self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any
        ) -> None:
            statuses.append(response.status_code)
            case.validate_response(response, checks=[not_a_server_error], transport_kwargs=kwargs)

    Workflow.run(settings=settings(FAST, stateful_step_count=10))
    assert statuses and max(statuses) < 500
