"""The store's own errors: a query or a record the store refuses (an unknown report, a cursor
it never gave, a run report filed twice with another body). Each carries its registry code;
the service answers it with that code's status like every :class:`WaiError`."""

from __future__ import annotations

from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.service.decoding.codes import DecodingCode
from wai_dispatch.service.store.codes import StoreCode


class StoreError(WaiError):
    """A refusal of the report store; raised with the specific ``code`` (``report_not_found``,
    ``cursor_invalid``, ``policy_busy``, …)."""

    code: str = StoreCode.SERVICE_ERROR


class DriverMissing(StoreError):
    """A PostgreSQL URL where PostgreSQL's driver (psycopg, the ``postgres`` extra) is not
    installed: a setting this installation cannot serve, named with the extra to install."""

    code = DecodingCode.SETTINGS_INVALID

    def __init__(self) -> None:
        super().__init__(
            "database_url (WAI_DATABASE_URL) names PostgreSQL, whose driver (psycopg) is not "
            "installed: pip install 'wai-dispatch[postgres]'"
        )
