"""Writes one benchmark's section into docs/BENCHMARKS.md (srift.validation.benchmarks, re-exported)."""

from __future__ import annotations

from srift.validation.benchmarks import BENCHMARKS_MD, HEADER, write_section

__all__ = ["BENCHMARKS_MD", "HEADER", "write_section"]
