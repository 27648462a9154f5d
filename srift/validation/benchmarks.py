"""Writing a section of docs/BENCHMARKS.md: the end-to-end accuracy run's, and every benchmark script's."""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from srift.errors import EnvironmentProblem
from srift.settings import REPO_ROOT, is_checkout

BENCHMARKS_MD = REPO_ROOT / "docs" / "BENCHMARKS.md"
HEADER = (
    "# Benchmarks\n\n"
    "Each section is written by the script named in it; re-run the command to refresh it. Figures are\n"
    "measured on the machine named in the section, never edited by hand.\n"
)


def write_section(
    name: str,
    body_markdown: str,
    *,
    command: str | None = None,
    measured_at: dt.datetime | None = None,
    host: str | None = None,
    path: Path = BENCHMARKS_MD,
) -> None:
    """Replace (or append) the section `name` of `path` with `body_markdown`, stamped with command, date
    and host.

    `measured_at` is when the figures were measured, for a section written later from a saved report
    (default: now); `host` what measured them when that was another machine (default: this one).
    """
    command = command or "python " + " ".join(sys.argv)
    stamp = (measured_at or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    if host is None:
        host = f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}"
        host += f", {os.cpu_count()} CPUs"
    section = (
        f"<!-- section:{name} -->\n## {name}\n\n"
        f"Command: `{command}`  \nMeasured: {stamp} on {host}\n\n{body_markdown.strip()}\n"
        f"<!-- /section:{name} -->\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text() if path.exists() else HEADER
    pattern = re.compile(rf"<!-- section:{re.escape(name)} -->.*?<!-- /section:{re.escape(name)} -->\n", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def section_name(report: Mapping[str, Any]) -> str:
    """The run's section: the shipped models' run, or (with any user model) the user models' run."""
    yours = ", your models" if report.get("user_models") else ""
    where = " across locations" if report.get("testbed", {}).get("spec", {}).get("locations") else ""
    return f"end-to-end accuracy{where} ({report['level']} matrix, testbed{yours})"


def write_benchmark_section(report: Mapping[str, Any], body: str, *, path: Path = BENCHMARKS_MD) -> None:
    """Replace this level's section (quick or full) in docs/BENCHMARKS.md with `body`."""
    if path == BENCHMARKS_MD and not is_checkout():
        raise EnvironmentProblem(
            f"{path} is not part of a source checkout of srift",
            hint="write benchmarks from a source checkout of srift (git clone, then make install)",
        )
    write_section(section_name(report), body, command=report.get("command") or None, path=path)
