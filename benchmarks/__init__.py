"""Benchmarks: scripts that measure a figure, print it and record it in docs/BENCHMARKS.md."""
