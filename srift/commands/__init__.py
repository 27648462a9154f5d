"""CLI commands, one module per area; each exposes register(app)."""
