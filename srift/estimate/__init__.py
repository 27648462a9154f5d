"""Estimated compute for accelerators nobody profiled on: a model's structure on each GPU's roofline."""
