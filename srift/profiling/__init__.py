"""Compute profiling (Srift §4.1): `profile_model` measures a torch model; `store` keeps the profiles.

Importing this package does not import torch; `profile_model` is loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from srift.profiling.profiler import profile_model

__all__ = ["profile_model"]


def __getattr__(name: str) -> Any:
    if name == "profile_model":
        from srift.profiling.profiler import profile_model

        return profile_model
    raise AttributeError(f"module 'srift.profiling' has no attribute {name!r}")
