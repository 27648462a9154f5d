"""Routes for predictions (filled in by its issue)."""

from fastapi import APIRouter

router = APIRouter()
