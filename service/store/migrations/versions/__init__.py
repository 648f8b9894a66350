"""The report store's schema revisions, oldest first."""
