"""The report-store suites' one fixture: each test that takes ``store`` runs on SQLite and on
PostgreSQL (the project's rule: one answer whatever the store)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from wai_dispatch.service.store.report_store import ReportStore


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> Iterator[ReportStore]:
    if request.param == "sqlite":
        yield request.getfixturevalue("report_store")
        return
    s = ReportStore(request.getfixturevalue("postgres_url"))
    s.migrate()
    yield s
    s.dispose()
