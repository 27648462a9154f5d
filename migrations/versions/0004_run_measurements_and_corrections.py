"""run iterations, calibration observations and corrections; a training run's own token

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27 04:30:00

Measured iteration times of tracked training runs (one row per run, plan and step), what each run measured
against its prediction, and the per model, instance type and network setting corrections learned from them.
Writes to the observations and corrections replace the `corrections` area's revision token, as migration
0003 does for the other areas, so cached prepared plans never answer with a stale correction.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WATCHED = {"calibration_observations": "corrections", "corrections": "corrections"}
PG_FUNCTION = "srift_replace_revision"


def upgrade() -> None:
    op.add_column("training_jobs", sa.Column("token_hash", sa.String(length=128), nullable=True))
    op.create_table(
        "run_iterations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("iteration_s", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["training_jobs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["plan_id"], ["plans.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id", "plan_id", "step"),
    )
    op.create_index("ix_run_iterations_job_id", "run_iterations", ["job_id"], unique=False)
    op.create_table(
        "calibration_observations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=200), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("network_key", sa.String(length=200), nullable=False),
        sa.Column("types", sa.JSON(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("plan_id", sa.Integer(), nullable=True),
        sa.Column("predicted_s", sa.Float(), nullable=False),
        sa.Column("compute_s", sa.Float(), nullable=False),
        sa.Column("comm_s", sa.Float(), nullable=False),
        sa.Column("measured_s", sa.Float(), nullable=False),
        sa.Column("log_variance", sa.Float(), nullable=False),
        sa.Column("prior_sigma", sa.Float(), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["training_jobs.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["plan_id"], ["plans.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("source"),
    )
    op.create_index(
        "ix_calibration_observations_job_id", "calibration_observations", ["job_id"], unique=False
    )
    op.create_index("ix_calibration_observations_model", "calibration_observations", ["model"], unique=False)
    op.create_table(
        "corrections",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("instance_type", sa.String(length=128), nullable=False),
        sa.Column("network_key", sa.String(length=200), nullable=False),
        sa.Column("runs", sa.Float(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("reset_after_id", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("model", "instance_type", "network_key"),
    )
    postgres = op.get_bind().dialect.name == "postgresql"
    random_token = (
        "md5(random()::text || clock_timestamp()::text)" if postgres else "lower(hex(randomblob(16)))"
    )
    op.execute(f"INSERT INTO data_revisions (name, token) VALUES ('corrections', {random_token})")
    for table, area in WATCHED.items():
        if postgres:
            op.execute(
                f"CREATE TRIGGER srift_revision_{table} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
                f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {PG_FUNCTION}('{area}')"
            )
            continue
        for event in ("INSERT", "UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER srift_revision_{table}_{event.lower()} AFTER {event} ON {table} BEGIN "
                f"INSERT INTO data_revisions (name, token) VALUES ('{area}', lower(hex(randomblob(16)))) "
                "ON CONFLICT (name) DO UPDATE SET token = excluded.token; END"
            )


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for table in WATCHED:
        if postgres:
            op.execute(f"DROP TRIGGER IF EXISTS srift_revision_{table} ON {table}")
        else:
            for event in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER IF EXISTS srift_revision_{table}_{event}")
    op.execute("DELETE FROM data_revisions WHERE name = 'corrections'")
    op.drop_table("corrections")
    op.drop_index("ix_calibration_observations_model", table_name="calibration_observations")
    op.drop_index("ix_calibration_observations_job_id", table_name="calibration_observations")
    op.drop_table("calibration_observations")
    op.drop_index("ix_run_iterations_job_id", table_name="run_iterations")
    op.drop_table("run_iterations")
    with op.batch_alter_table("training_jobs") as batch:
        batch.drop_column("token_hash")
