"""The report store (SQLAlchemy, SQLite or PostgreSQL): the database and its migrations
(:mod:`.report_store`, :mod:`.models`, ``migrations/``), report queries (:mod:`.reports`), the one
report record (:mod:`.records`), bearer tokens (:mod:`.bearer`), the governance tables
(:mod:`.policies`), the set registry (:mod:`.setregistry`), the durable spool (:mod:`.spool`)
and its errors (:mod:`.errors`).

Below the HTTP layer: the CLI's ``tokens`` and ``policy`` commands use it without the service."""
