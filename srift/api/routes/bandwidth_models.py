"""Routes for bandwidth_models (filled in by its issue)."""

from fastapi import APIRouter

router = APIRouter()
