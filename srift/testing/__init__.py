"""Harness shared by the test suite and the benchmarks: a real `srift serve` subprocess, plan cases."""
