"""The decoder service: FastAPI app, report store, auth, limits, metrics, dashboard."""
