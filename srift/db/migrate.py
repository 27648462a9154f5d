"""Alembic driven from code: upgrade, downgrade and current revision for a database URL."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from srift.db.session import get_engine
from srift.errors import EnvironmentProblem
from srift.settings import REPO_ROOT

MIGRATIONS_DIR = REPO_ROOT / "migrations"


def alembic_config(url: str) -> Config:
    if not (MIGRATIONS_DIR / "env.py").exists():
        raise EnvironmentProblem(
            f"migrations folder not found at {MIGRATIONS_DIR}",
            hint="run srift from a checkout or the Docker image, which ship migrations/",
        )
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


def head_revision(url: str) -> str | None:
    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()


def current_revision(url: str) -> str | None:
    with get_engine(url).connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
