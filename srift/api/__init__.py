"""HTTP edge: FastAPI app factory, dependencies, pydantic schemas, routes and the dashboard."""
