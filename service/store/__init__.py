"""The report store (SQLAlchemy, SQLite or PostgreSQL): the database and its migrations
(:mod:`.db`, :mod:`.models`, ``migrations/``), report queries (:mod:`.reports`), the one
report record (:mod:`.records`), bearer tokens (:mod:`.tokens`), the governance tables
(:mod:`.policies`), the durable spool (:mod:`.spool`) and its errors (:mod:`.errors`).

Below the HTTP layer: the CLI's ``tokens`` and ``policy`` commands use it without the service.
Used through its modules."""

__all__: list[str] = []
