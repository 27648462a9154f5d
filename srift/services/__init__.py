"""Application services: gather inputs from the stores, call the pure sim/optimize code, store results."""
