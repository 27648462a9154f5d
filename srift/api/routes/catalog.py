"""Routes for catalog (filled in by its issue)."""

from fastapi import APIRouter

router = APIRouter()
