"""owners: profiles and plans belong to the API token's name that stored them (NULL: everyone's)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27 04:30:00

Rows stored before owners existed (reference profiles, uploads, plans) keep a NULL owner: shared, as they
were. `model_profiles.shared` lets an owner offer a profile to others by id.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE (no batch copy): a copied SQLite table would lose 0003's revision triggers.
    op.add_column("model_profiles", sa.Column("owner", sa.String(length=200), nullable=True))
    op.add_column(
        "model_profiles", sa.Column("shared", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.create_index("ix_model_profiles_owner", "model_profiles", ["owner"])
    op.add_column("plans", sa.Column("owner", sa.String(length=200), nullable=True))
    op.create_index("ix_plans_owner", "plans", ["owner"])


def downgrade() -> None:
    op.drop_index("ix_plans_owner", table_name="plans")
    op.drop_column("plans", "owner")
    op.drop_index("ix_model_profiles_owner", table_name="model_profiles")
    op.drop_column("model_profiles", "shared")
    op.drop_column("model_profiles", "owner")
