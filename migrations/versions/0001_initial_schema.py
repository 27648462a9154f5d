"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 01:58:31.526132
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=128), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_table(
        "bandwidth_models",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("training_query", sa.JSON(), nullable=False),
        sa.Column("hyperparams", sa.JSON(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("artifact_dir", sa.String(length=500), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("version"),
    )
    op.create_table(
        "catalog_snapshots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=500), nullable=False),
        sa.Column("as_of", sa.Date(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    with op.batch_alter_table("catalog_snapshots", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_catalog_snapshots_provider"), ["provider"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("provider", sa.String(length=32), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("token_hash", sa.String(length=128), nullable=True),
        sa.Column("worker_id", sa.String(length=128), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("log", sa.Text(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_kind"), ["kind"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_state"), ["state"], unique=False)

    op.create_table(
        "model_profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("accelerator", sa.String(length=200), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("fingerprint"),
    )
    with op.batch_alter_table("model_profiles", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_model_profiles_model"), ["model"], unique=False)

    op.create_table(
        "plans",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "instance_types",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("gpu_model", sa.String(length=64), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("gpu_memory_gib", sa.Float(), nullable=False),
        sa.Column("vcpus", sa.Integer(), nullable=False),
        sa.Column("memory_gib", sa.Float(), nullable=False),
        sa.Column("network_gbps", sa.Float(), nullable=False),
        sa.Column("network_burst", sa.Boolean(), nullable=False),
        sa.Column("interconnect", sa.String(length=16), nullable=False),
        sa.Column("interconnect_gbps", sa.Float(), nullable=False),
        sa.Column("efa", sa.Boolean(), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["snapshot_id"], ["catalog_snapshots.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("snapshot_id", "name"),
    )
    with op.batch_alter_table("instance_types", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_instance_types_name"), ["name"], unique=False)
        batch_op.create_index(batch_op.f("ix_instance_types_provider"), ["provider"], unique=False)
        batch_op.create_index(batch_op.f("ix_instance_types_snapshot_id"), ["snapshot_id"], unique=False)

    op.create_table(
        "prices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("instance_type", sa.String(length=128), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("market", sa.String(length=16), nullable=False),
        sa.Column("price_usd_per_hr", sa.Float(), nullable=False),
        sa.Column("source", sa.String(length=500), nullable=False),
        sa.Column("as_of", sa.Date(), nullable=False),
        sa.ForeignKeyConstraint(["snapshot_id"], ["catalog_snapshots.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("snapshot_id", "instance_type", "region", "market"),
    )
    with op.batch_alter_table("prices", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_prices_region"), ["region"], unique=False)
        batch_op.create_index(batch_op.f("ix_prices_snapshot_id"), ["snapshot_id"], unique=False)

    op.create_table(
        "probe_samples",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("origin", sa.String(length=32), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("zone", sa.String(length=64), nullable=False),
        sa.Column("instance_type", sa.String(length=128), nullable=False),
        sa.Column("backend", sa.String(length=16), nullable=False),
        sa.Column("buffer_bytes", sa.Integer(), nullable=False),
        sa.Column("world_size", sa.Integer(), nullable=False),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("ranks_per_node", sa.Integer(), nullable=False),
        sa.Column("async_count", sa.Integer(), nullable=False),
        sa.Column("time_s", sa.Float(), nullable=False),
        sa.Column("algbw_gbps", sa.Float(), nullable=False),
        sa.Column("busbw_gbps", sa.Float(), nullable=False),
        sa.Column("features", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("fingerprint"),
    )
    with op.batch_alter_table("probe_samples", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_probe_samples_job_id"), ["job_id"], unique=False)
        batch_op.create_index(
            "ix_probe_samples_lookup", ["instance_type", "world_size", "buffer_bytes"], unique=False
        )

    op.create_table(
        "training_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("current_plan_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("iterations_done", sa.Integer(), nullable=False),
        sa.Column("elapsed_s", sa.Float(), nullable=False),
        sa.Column("spent_usd", sa.Float(), nullable=False),
        sa.Column("excluded_types", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["current_plan_id"],
            ["plans.id"],
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"],
            ["plans.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("training_jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_training_jobs_plan_id"), ["plan_id"], unique=False)

    op.create_table(
        "training_job_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["training_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("training_job_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_training_job_events_job_id"), ["job_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("training_job_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_training_job_events_job_id"))

    op.drop_table("training_job_events")
    with op.batch_alter_table("training_jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_training_jobs_plan_id"))

    op.drop_table("training_jobs")
    with op.batch_alter_table("probe_samples", schema=None) as batch_op:
        batch_op.drop_index("ix_probe_samples_lookup")
        batch_op.drop_index(batch_op.f("ix_probe_samples_job_id"))

    op.drop_table("probe_samples")
    with op.batch_alter_table("prices", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_prices_snapshot_id"))
        batch_op.drop_index(batch_op.f("ix_prices_region"))

    op.drop_table("prices")
    with op.batch_alter_table("instance_types", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_instance_types_snapshot_id"))
        batch_op.drop_index(batch_op.f("ix_instance_types_provider"))
        batch_op.drop_index(batch_op.f("ix_instance_types_name"))

    op.drop_table("instance_types")
    op.drop_table("plans")
    with op.batch_alter_table("model_profiles", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_model_profiles_model"))

    op.drop_table("model_profiles")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_state"))
        batch_op.drop_index(batch_op.f("ix_jobs_kind"))

    op.drop_table("jobs")
    with op.batch_alter_table("catalog_snapshots", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_catalog_snapshots_provider"))

    op.drop_table("catalog_snapshots")
    op.drop_table("bandwidth_models")
    op.drop_table("api_tokens")
