"""Alembic migrations of the report store (run by :func:`service.store.report_store.migrate`)."""
