"""The testbed's state file: a journal of every resource, written before the resource is made."""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from srift.errors import Conflict

STATE_VERSION = 1


class StateFile:
    """`<root>/<prefix>.json` (the journal), `<prefix>.lock` (one writer), `<prefix>/` (run files)."""

    def __init__(self, root: Path, prefix: str) -> None:
        self.root = root
        self.prefix = prefix
        self.path = root / f"{prefix}.json"
        self.lock_path = root / f"{prefix}.lock"
        self.run_dir = root / prefix

    @contextmanager
    def locked(self, *, timeout_s: float = 60.0) -> Iterator[int]:
        """Hold the prefix's lock; yields its fd so child commands can inherit it (a killed `up`'s children
        keep it held until they finish, so a following `down` waits for them)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise Conflict(
                            f"testbed {self.prefix!r} is busy (another up/down holds {self.lock_path})",
                            hint="wait for it to finish, or stop that process",
                        ) from None
                    time.sleep(0.05)
            yield fd
        finally:
            os.close(fd)

    def load(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {"version": STATE_VERSION, "prefix": self.prefix, "phase": "corrupt", "resources": []}
        return data if isinstance(data, dict) else None

    def save(self, state: dict[str, Any]) -> None:
        """Write atomically and durably (a crash leaves the old or the new journal, never half of one)."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as fh:
            json.dump(state, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(self.path)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        if self.run_dir.exists():
            for child in self.run_dir.iterdir():
                child.unlink(missing_ok=True)
            self.run_dir.rmdir()


def known_prefixes(root: Path) -> list[str]:
    try:
        return sorted(p.stem for p in root.glob("*.json"))
    except OSError:
        return []
