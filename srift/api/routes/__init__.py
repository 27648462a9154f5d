"""Route modules, one per area; each exposes `router`."""
