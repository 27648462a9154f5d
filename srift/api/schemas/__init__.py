"""Pydantic request and response schemas of the API, one module per area."""
