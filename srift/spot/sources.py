"""Where trace files come from: a file, a folder, or a git repository (a checkout or a bare mirror).

Kept apart from the parsers (srift.spot.traces), as SkyPilot keeps its data fetchers apart from the code
that reads the data. A git repository is read with `git ls-tree` / `git cat-file` at a commit (HEAD
unless told), so that every trace records the commit it came from.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from srift.errors import InvalidInput
from srift.spot.traces import (
    DEFAULT_TICK_S,
    PUBLIC_REPOSITORY,
    SpotTrace,
    TraceMeta,
    read_log_csv,
    read_public,
)
from srift.spot.traceset import read_traceset

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_FILES = 10_000
SUFFIXES = (".json", ".csv")


@dataclass(frozen=True, slots=True)
class RawFile:
    """One trace file's bytes, its path inside its root, and the repository and commit it came from."""

    path: str
    raw: bytes
    repository: str
    commit: str | None


def _git(root: Path, *args: str, binary: bool = False) -> bytes:
    git = shutil.which("git")
    if git is None:
        raise InvalidInput(
            f"{root} is a git repository, and git is not installed",
            hint="install git, or give a checked-out folder",
            field="path",
        )
    done = subprocess.run([git, "-C", str(root), *args], capture_output=True, check=False, timeout=120)
    if done.returncode != 0:
        raise InvalidInput(
            f"git {' '.join(args[:2])} failed in {root}: "
            f"{done.stderr.decode(errors='replace').strip()[:300]}",
            hint="give a readable git repository and an existing commit",
            field="path",
        )
    return done.stdout


def is_git_repository(path: Path) -> bool:
    """A bare repository (HEAD, objects/, refs/) or a checkout's root (.git)."""
    return (path / ".git").exists() or (
        (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()
    )


def _repository_name(root: Path) -> str:
    """The public repository when the mirror is named after it (owner+name), else the folder's name."""
    for part in (root.name, root.parent.name):
        if "+" in part:
            return part.replace("+", "/", 1)
    return PUBLIC_REPOSITORY if root.name == "spot-traces" else root.name


def commit_date(root: Path, commit: str) -> str | None:
    """The committer date (YYYY-MM-DD) of `commit` in the repository at `root`, or None if unreadable."""
    try:
        return _git(root, "log", "-1", "--format=%cs", commit).decode().strip() or None
    except InvalidInput:
        return None


def git_files(root: Path, *, commit: str = "HEAD", repository: str | None = None) -> Iterator[RawFile]:
    """Every .json and .csv file of the repository at `commit`, in path order."""
    sha = _git(root, "rev-parse", "--verify", f"{commit}^{{commit}}").decode().strip()
    listing = _git(root, "ls-tree", "-r", "-z", "--name-only", sha).decode(errors="replace")
    names = sorted(n for n in listing.split("\0") if n.endswith(SUFFIXES))
    if len(names) > MAX_FILES:
        raise InvalidInput(
            f"{root} holds {len(names)} trace files, more than {MAX_FILES}",
            hint="import a sub-folder",
            field="path",
        )
    repo = repository or _repository_name(root)
    for name in names:
        yield RawFile(path=name, raw=_git(root, "show", f"{sha}:{name}"), repository=repo, commit=sha)


def folder_files(root: Path) -> Iterator[RawFile]:
    """Every .json and .csv file under a folder, in path order (paths relative to the folder)."""
    paths = sorted(
        p for p in root.rglob("*") if p.is_file() and p.suffix in SUFFIXES and ".git" not in p.parts
    )
    if len(paths) > MAX_FILES:
        raise InvalidInput(
            f"{root} holds {len(paths)} trace files, more than {MAX_FILES}",
            hint="import a sub-folder",
            field="path",
        )
    for p in paths:
        yield _file(p, rel=p.relative_to(root).as_posix(), repository=_repository_name(root))


def _file(path: Path, *, rel: str, repository: str) -> RawFile:
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InvalidInput(
            f"{path} is {size} bytes, more than {MAX_FILE_BYTES}",
            hint="split the trace into smaller files",
            field="path",
        )
    return RawFile(path=rel, raw=path.read_bytes(), repository=repository, commit=None)


def raw_files(path: Path, *, commit: str = "HEAD") -> list[RawFile]:
    """The trace files at `path`: a git repository, a folder, or one file."""
    if not path.exists():
        raise InvalidInput(
            f"{path} does not exist", hint="give a trace file, a folder or a git repository", field="path"
        )
    if path.is_dir():
        files = list(git_files(path, commit=commit)) if is_git_repository(path) else list(folder_files(path))
    else:
        files = [_file(path, rel=path.name, repository="user")]
    if not files:
        raise InvalidInput(
            f"{path} holds no .json or .csv trace", hint="give the public traces or a CSV log", field="path"
        )
    return files


def parse_file(
    f: RawFile, *, meta: TraceMeta | None = None, provider: str = "aws", tick_s: float = DEFAULT_TICK_S
) -> list[SpotTrace]:
    """One file as traces: a public JSON trace, or a CSV log (one trace per zone and type)."""
    if f.path.endswith(".csv"):
        return read_log_csv(f.raw, path=f.path, provider=provider, tick_s=tick_s)
    if b'"srift-spot-traces/' in f.raw[:256]:
        return read_traceset(_json(f), origin=f.path)
    repository = f.repository if f.repository != "user" else "user"
    return [read_public(f.raw, path=f.path, repository=repository, commit=f.commit, meta=meta)]


def _json(f: RawFile) -> Any:
    """A trace set file decoded (srift traces import writes them); InvalidInput when it is not JSON."""
    try:
        return json.loads(f.raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InvalidInput(
            f"{f.path}: a trace set that is not UTF-8 JSON ({exc})",
            hint="import the original traces again",
            field="document",
        ) from exc


def read_traces(
    path: Path,
    *,
    commit: str = "HEAD",
    meta: TraceMeta | None = None,
    provider: str = "aws",
    tick_s: float = DEFAULT_TICK_S,
) -> list[SpotTrace]:
    """Every trace at `path` (srift traces import, the benchmark's --traces); the first bad file refuses."""
    out: list[SpotTrace] = []
    for f in raw_files(path, commit=commit):
        out.extend(parse_file(f, meta=meta, provider=provider, tick_s=tick_s))
    return out
