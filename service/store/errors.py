"""The store's own errors: a query or a record the store refuses (an unknown report, a cursor
it never gave, a run report filed twice with another body), and a registry that does not
answer. Each names its stable ``code`` and, as its docstring, the code's meaning."""

from __future__ import annotations

from wai_dispatch.dispatch.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    Unavailable,
    WaiError,
)
from wai_dispatch.service.decoding.errors import SettingsInvalid


class StoreError(WaiError):
    """A refusal of the report store (each subclass names its code)."""


class CursorInvalid(InvalidInput, StoreError):
    """a paging cursor this service did not give"""

    code = "cursor_invalid"


class ReportNotFound(NotFound, StoreError):
    """no stored report with that id (or not this sink's)"""

    code = "report_not_found"


class RunReportSinkMismatch(Forbidden, StoreError):
    """a run report whose sink is not the submitting token's name"""

    code = "run_report_sink_mismatch"


class RunReportConflict(Conflict, StoreError):
    """a run report id submitted before with another body"""

    code = "run_report_conflict"


class RunReportNotFound(NotFound, StoreError):
    """no stored run report with that id (or not this sink's)"""

    code = "run_report_not_found"


class RequestIdReused(InvalidInput, StoreError):
    """a request id sent before with another envelope: nothing decoded, nothing stored"""

    code = "request_id_reused"


class RequestInFlight(Conflict, StoreError):
    """a request id whose first decode is still running: retry once it has answered"""

    code = "request_in_flight"


class PolicyBusy(Conflict, StoreError):
    """the policy kept changing while this one was being set"""

    code = "policy_busy"


class SetRegistryDown(Unavailable, StoreError):
    """an install, removal or default of a set while the set registry (the report database)
    does not answer: nothing changed; or a set this replica lacks while it cannot ask the
    registry whether it is installed; retry (Retry-After)"""

    code = "set_registry_down"
    retry_after_s = 5


class DriverMissing(SettingsInvalid, StoreError):
    """A PostgreSQL URL where PostgreSQL's driver (psycopg, the ``postgres`` extra) is not
    installed: a setting this installation cannot serve, named with the extra to install."""

    def __init__(self) -> None:
        super().__init__(
            "database_url (WAI_DATABASE_URL) names PostgreSQL, whose driver (psycopg) is not "
            "installed: pip install 'wai-dispatch[postgres]'"
        )
