"""Routes for profiles (filled in by its issue)."""

from fastapi import APIRouter

router = APIRouter()
