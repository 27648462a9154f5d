"""Srift: picks cloud VMs and per-VM batch sizes for data-parallel training under time and cost limits."""

__version__ = "0.1.0"
