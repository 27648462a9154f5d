"""The dashboard served at `/` (filled in by the dashboard issue)."""

from fastapi import FastAPI


def mount(app: FastAPI) -> None:
    """Attach the dashboard's pages and static files to the app."""
