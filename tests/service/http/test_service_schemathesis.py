"""Property-based tests of the published OpenAPI schema against the live service
(schemathesis): whatever a client sends to any operation, with any role's token (sink, operator,
admin), the answer is never a 5xx; and schemathesis' state machine per role along the schema's
OpenAPI links (service/http/openapi.py: a decode to its reports and set, a report list to one
report and its next page, a set list to one set and its removal, a run report to reading it
back, a policy version to reading it), each step held to no 5xx, a documented status, content
type and body, and the stateful checks (a removed set is gone, a created resource is there).

Cursors: half the examples of a paged list carry one that decodes (``_svc.cursor_params``: the
list's tag, parts of any type and size), so the typed checks are reached, not only base64 errors.

Kept short for CI: ``WAI_SCHEMATHESIS_EXAMPLES`` examples per operation and role (default 25);
``WAI_SCHEMATHESIS_SCENARIOS`` stateful scenarios per role (default 6) of up to
``WAI_SCHEMATHESIS_STEPS`` steps (default 8). ``make fuzz`` runs more of each."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from _svc import Live, cursor_params, pg_database, serve
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ensure_resource_availability,
    response_schema_conformance,
    status_code_conformance,
    use_after_free,
)

from wai_dispatch.service.http.openapi import LINKS

EXAMPLES = int(os.environ.get("WAI_SCHEMATHESIS_EXAMPLES", "25"))
SCENARIOS = int(os.environ.get("WAI_SCHEMATHESIS_SCENARIOS", "6"))
STEPS = int(os.environ.get("WAI_SCHEMATHESIS_STEPS", "8"))
REPO = Path(__file__).resolve().parents[3]
SAMPLE = json.loads((REPO / "conformance" / "envelopes" / "bmshj2018-demo-q3.json").read_text())
RUN_REPORT = json.loads((REPO / "docs" / "examples" / "run-report.json").read_text())
POLICY = (REPO / "docs" / "examples" / "policy.yaml").read_text()
#: What every stateful step is held to.
STATEFUL_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    use_after_free,
    ensure_resource_availability,
]
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
    """The schema the service publishes (built from the app; nothing needs to run); each call a
    schema object of its own (the stateful run's hooks stay on its own)."""
    from wai_dispatch.service.http.app import create_app
    from wai_dispatch.service.settings import Settings

    app = create_app(Settings(data_dir=Path("/nonexistent")))
    return schemathesis.openapi.from_dict(app.openapi())


SCHEMA = _schema()
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    """The service on each store (issue 29: no 5xx on either), a decode stored (rows in every
    list, that a cursor's position is compared with)."""
    root = tmp_path_factory.mktemp("schemathesis")
    with contextlib.ExitStack() as stack:
        url = {}
        if request.param == "postgres":
            url["database_url"] = stack.enter_context(
                pg_database(request.getfixturevalue("postgres"))
            )
        running = stack.enter_context(serve(root, **url))
        with running.client("sink") as c:
            assert c.post("/v1/decode", json=SAMPLE, timeout=120).status_code == 200
        yield running


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("operation", OPERATIONS, ids=[op.label for op in OPERATIONS])
def test_no_operation_answers_5xx(operation: Any, role: str, live: Live) -> None:
    auth = {"Authorization": f"Bearer {live.tokens[role]}"}
    seen: list[int] = []

    @given(case=operation.as_strategy(), cursor=cursor_params(operation.path), swap=st.booleans())
    @FAST
    def run(case: Any, cursor: dict[str, str], swap: bool) -> None:
        if swap and {"cursor", "after"} & {p.name for p in operation.query}:
            case.query = {**(case.query or {}), **cursor}  # a cursor that decodes, of any type
        response = case.call_and_validate(
            base_url=live.url, headers=auth, checks=[not_a_server_error]
        )
        seen.append(response.status_code)

    run()
    print(f"{operation.label} as {role}: {len(seen)} cases, statuses {sorted(set(seen))}")
    assert seen and max(seen) < 500


@pytest.fixture(scope="module")
def stateful_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A service of the stateful runs' own (the admin's scenarios may remove its sets), with
    the example policy in force, so run reports are judged."""
    with serve(tmp_path_factory.mktemp("stateful")) as running:
        with running.client("admin") as admin:
            put = admin.put(
                "/v1/policy", content=POLICY, headers={"Content-Type": "application/yaml"}
            )
            assert put.status_code == 200, put.text
        yield running


def _valid_bodies(name: str) -> Any:
    """A ``flatmap_case`` hook: half the decodes, run reports and policies a scenario sends are
    valid ones (the bundled sample envelope, the example run report under a fresh id and the
    token's name, the example policy), so the links from their answers are followed."""

    def flatmap_case(context: Any, case: Any) -> Any:
        label = context.operation.label if context.operation is not None else ""

        def valid(n: int) -> Any:
            if label == "POST /v1/decode":
                case.body, case.media_type = SAMPLE, "application/json"
            elif label == "POST /v1/run-reports":
                run = {**RUN_REPORT, "id": f"stateful-{n}", "sink": name}
                case.body, case.media_type = run, "application/json"
            elif label == "PUT /v1/policy":
                case.body, case.media_type = POLICY, "application/yaml"
            return case

        if label not in {"POST /v1/decode", "POST /v1/run-reports", "PUT /v1/policy"}:
            return st.just(case)
        return st.one_of(st.just(case), st.integers(0, 2**31).map(valid))

    return flatmap_case


@pytest.mark.parametrize("role", ROLES)
def test_stateful_along_the_links(role: str, stateful_live: Live) -> None:
    """Scenarios along the schema's links with ``role``'s token: no 5xx, every answer as the
    schema documents it, and the links are followed (steps that took a linked value)."""
    live = stateful_live
    token = live.tokens[role]
    name = live.service.tokens.lookup(token).name
    auth = {"Authorization": f"Bearer {token}"}
    schema = _schema()
    schema.hook(_valid_bodies(name))
    machine = schema.as_state_machine()
    assert schema.statistic.transitions.total == len(LINKS)  # every link resolves
    statuses: list[int] = []
    linked: list[str] = []

    class Workflow(machine):  # type: ignore[misc,valid-type]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            # a first decode builds its programs: seconds on a loaded machine
            return {"base_url": live.url, "headers": auth, "timeout": 120}

        def step(self, input: Any) -> Any:
            if input.transition is not None and input.applied_parameters:
                linked.append(input.transition.id)
            return super().step(input)

        def validate_response(
            self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any
        ) -> None:
            statuses.append(response.status_code)
            case.validate_response(
                response,
                checks=STATEFUL_CHECKS,
                transport_kwargs=kwargs or None,
                recorder=self.recorder,
            )

    started = time.monotonic()
    Workflow.run(settings=settings(FAST, max_examples=SCENARIOS, stateful_step_count=STEPS))
    seconds = time.monotonic() - started
    print(
        f"stateful {role}: {SCENARIOS} scenarios, {len(statuses)} steps "
        f"({len(linked)} along a link: {sorted(set(linked))}) in {seconds:.1f} s; "
        f"statuses {sorted(set(statuses))}"
    )
    assert statuses and max(statuses) < 500
    assert linked, "no scenario followed a link"


def test_the_schema_links_producers_to_consumers_and_describes_errors() -> None:
    """Every link names an operation of the schema and parameters it takes; every operation's
    error answers are the one error body."""
    from wai_dispatch.service.http.app import create_app
    from wai_dispatch.service.settings import Settings

    doc = create_app(Settings(data_dir=Path("/nonexistent"))).openapi()
    by_id = {op["operationId"]: op for ops in doc["paths"].values() for op in ops.values()}
    found = 0
    for ops in doc["paths"].values():
        for op in ops.values():
            for status, answer in op["responses"].items():
                if int(status) >= 400:
                    ref = answer["content"]["application/json"]["schema"]["$ref"]
                    assert ref == "#/components/schemas/Error"
                for link in answer.get("links", {}).values():
                    target = by_id[link["operationId"]]
                    takes = {p["name"] for p in target.get("parameters", [])}
                    assert set(link["parameters"]) <= takes, link
                    found += 1
    assert found == len(LINKS) >= 14
    assert "HTTPValidationError" not in doc["components"]["schemas"]
