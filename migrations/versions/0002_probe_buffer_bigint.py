"""probe_samples.buffer_bytes as BIGINT (nccl-tests reports buffers up to 16 GiB and more)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 02:35:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("probe_samples") as batch:
        batch.alter_column(
            "buffer_bytes", existing_type=sa.Integer(), type_=sa.BigInteger(), existing_nullable=False
        )


def downgrade() -> None:
    with op.batch_alter_table("probe_samples") as batch:
        batch.alter_column(
            "buffer_bytes", existing_type=sa.BigInteger(), type_=sa.Integer(), existing_nullable=False
        )
