"""Routes for probe_jobs (filled in by its issue)."""

from fastapi import APIRouter

router = APIRouter()
