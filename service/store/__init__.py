"""The report store (SQLAlchemy, SQLite or PostgreSQL): the database and its migrations
(:mod:`.report_store`, :mod:`.models`, ``migrations/``), report queries (:mod:`.reports`), the one
report record (:mod:`.records`), bearer tokens (:mod:`.tokens`), the governance tables
(:mod:`.policies`), the set registry (:mod:`.setregistry`), the durable spool (:mod:`.spool`)
and its errors (:mod:`.errors`).

Below the HTTP layer: the CLI's ``tokens`` and ``policy`` commands use it without the service.
Face: ``ReportStore`` (``StoreDown`` when its database does not answer), the one
``ReportRecord``, report ``Filters``, token ``Role``, ``PolicyStore``, ``SetRegistry`` and
``StoreError``, each imported on first use."""

from __future__ import annotations

from wai_dispatch._face import lazy_face as _lazy_face

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.service.store.errors import StoreError
    from wai_dispatch.service.store.policies import PolicyStore
    from wai_dispatch.service.store.records import ReportRecord
    from wai_dispatch.service.store.report_store import ReportStore, StoreDown
    from wai_dispatch.service.store.reports import Filters
    from wai_dispatch.service.store.setregistry import SetRegistry
    from wai_dispatch.service.store.tokens import Role

__all__ = [
    "Filters",
    "PolicyStore",
    "ReportRecord",
    "ReportStore",
    "Role",
    "SetRegistry",
    "StoreDown",
    "StoreError",
]

#: The face: each name and its module (``module:attr`` where named otherwise), imported on
#: first use (wai_dispatch/_face.py).
_FACE = {
    "Filters": "reports",
    "PolicyStore": "policies",
    "ReportRecord": "records",
    "ReportStore": "report_store",
    "Role": "tokens",
    "SetRegistry": "setregistry",
    "StoreDown": "report_store",
    "StoreError": "errors",
}

__getattr__, __dir__ = _lazy_face(__name__, _FACE, __all__)
