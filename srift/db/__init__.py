"""Database: SQLAlchemy 2 typed tables, engine/session handling, and repositories per area."""
