"""Routes for plans (filled in by its issue)."""

from fastapi import APIRouter

router = APIRouter()
