"""Alembic driven from code: upgrade, downgrade and current revision for a database URL.

Alembic is imported only when there is migrating to do: `upgrade` to head first compares the database's
recorded revision with the head of migrations/versions (read from the files' `revision` and
`down_revision` assignments, as Alembic reads them), and a database already there costs one query. Every
local `srift plan` and `srift predict` runs this check, so the ~0.15 s of importing Alembic (and each
SQL dialect it registers) is spent only when it is needed.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text

from srift.db.session import get_engine
from srift.errors import EnvironmentProblem, InvalidInput
from srift.settings import REPO_ROOT

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = REPO_ROOT / "migrations"
VERSION_TABLE = "alembic_version"
"""Alembic's default table for the applied revision (migrations/env.py does not rename it)."""


def alembic_config(url: str) -> Config:
    from alembic.config import Config

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
    """Migrate to `revision`; to head, nothing is imported or run when the database is already there.
    A revision Alembic cannot resolve is InvalidInput on `revision` (see `_migrate`)."""
    if revision == "head" and is_at_head(url):
        return
    _migrate("upgrade", url, revision)


def downgrade(url: str, revision: str) -> None:
    """Roll back to `revision` (`base`: an empty database); InvalidInput on `revision` as for `upgrade`."""
    _migrate("downgrade", url, revision)


def _migrate(direction: str, url: str, revision: str) -> None:
    """Run Alembic's upgrade or downgrade to `revision`. Alembic reports a revision it cannot resolve (an
    unknown id, a relative step past either end) as a CommandError, which would reach `srift db` users as
    a traceback: it becomes InvalidInput naming the revision and the ones there are."""
    from alembic import command
    from alembic.util.exc import CommandError

    step = command.upgrade if direction == "upgrade" else command.downgrade
    try:
        step(alembic_config(url), revision)
    except CommandError as exc:
        known = sorted(r for r in map(_revision_of, (MIGRATIONS_DIR / "versions").glob("*.py")) if r)
        ids = ", ".join(rev for rev, _ in known)
        raise InvalidInput(
            f"cannot {direction} to {revision!r}: {exc}",
            hint=f"give one of the revisions {ids}, head, base or a relative step such as -1 "
            "(`srift db current` shows the database's revision)",
            field="revision",
        ) from None


def head_revision(url: str) -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()


def current_revision(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with get_engine(url).connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def script_head(versions_dir: Path | None = None) -> str | None:
    """The single head of the migration scripts, read without Alembic, or None when it cannot be told
    (a file whose revision is not a plain literal, several heads): the caller then asks Alembic."""
    folder = versions_dir or MIGRATIONS_DIR / "versions"
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in sorted(folder.glob("*.py")):
        found = _revision_of(path)
        if found is None:
            return None
        rev, down = found
        revisions.add(rev)
        parents.update(down)
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _revision_of(path: Path) -> tuple[str, tuple[str, ...]] | None:
    """A script's (revision, down revisions) from its module-level literal assignments, or None."""
    try:
        source = path.read_text()
    except (OSError, ValueError):
        return None
    return _revision_in(source, str(path))


@functools.lru_cache(maxsize=64)
def _revision_in(source: str, filename: str) -> tuple[str, tuple[str, ...]] | None:
    """`_revision_of` a script's text, parsed once per process (every start-up and local command asks,
    twice: parsing the scripts was most of an up-to-date database's check)."""
    values: dict[str, object] = {}
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id in ("revision", "down_revision") and value is not None:
            try:
                values[target.id] = ast.literal_eval(value)
            except ValueError:
                return None
    rev, down = values.get("revision"), values.get("down_revision", _MISSING)
    if not isinstance(rev, str) or down is _MISSING:
        return None
    if down is None:
        return rev, ()
    if isinstance(down, str):
        return rev, (down,)
    if isinstance(down, tuple | list) and all(isinstance(d, str) for d in down):
        return rev, tuple(down)
    return None


_MISSING = object()


def is_at_head(url: str) -> bool:
    """Whether the database records exactly the scripts' head revision (False when unsure)."""
    head = script_head()
    if head is None:
        return False
    with get_engine(url).connect() as conn:
        if not inspect(conn).has_table(VERSION_TABLE):
            return False
        rows = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    return list(rows) == [head]
