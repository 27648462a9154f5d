"""data_revisions: a token per watched area, replaced by triggers on every write (cache invalidation)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 20:00:00

The mapping is frozen here as it was when written; srift.db.revisions.WATCHED_TABLES must match it (a test
writes to every watched table and checks that its area's token changes). A later migration that adds a
watched table adds its triggers the same way.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WATCHED = {
    "catalog_snapshots": "catalog",
    "instance_types": "catalog",
    "prices": "catalog",
    "model_profiles": "profiles",
    "bandwidth_models": "bandwidth_models",
}
PG_FUNCTION = "srift_replace_revision"


def upgrade() -> None:
    op.create_table(
        "data_revisions",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("token", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    postgres = op.get_bind().dialect.name == "postgresql"
    random_token = (
        "md5(random()::text || clock_timestamp()::text)" if postgres else "lower(hex(randomblob(16)))"
    )
    for area in sorted(set(WATCHED.values())):  # a database upgraded with data in it starts with tokens
        op.execute(f"INSERT INTO data_revisions (name, token) VALUES ('{area}', {random_token})")
    if postgres:
        op.execute(
            f"""
            CREATE FUNCTION {PG_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              INSERT INTO data_revisions (name, token)
              VALUES (TG_ARGV[0], md5(random()::text || clock_timestamp()::text || txid_current()::text))
              ON CONFLICT (name) DO UPDATE SET token = EXCLUDED.token;
              RETURN NULL;
            END $$
            """
        )
        for table, area in WATCHED.items():
            op.execute(
                f"CREATE TRIGGER srift_revision_{table} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
                f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {PG_FUNCTION}('{area}')"
            )
        return
    for table, area in WATCHED.items():
        for event in ("INSERT", "UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER srift_revision_{table}_{event.lower()} AFTER {event} ON {table} BEGIN "
                f"INSERT INTO data_revisions (name, token) VALUES ('{area}', lower(hex(randomblob(16)))) "
                "ON CONFLICT (name) DO UPDATE SET token = excluded.token; END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in WATCHED:
            op.execute(f"DROP TRIGGER IF EXISTS srift_revision_{table} ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {PG_FUNCTION}()")
    else:
        for table in WATCHED:
            for event in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER IF EXISTS srift_revision_{table}_{event}")
    op.drop_table("data_revisions")
