"""Writes one benchmark's section into docs/BENCHMARKS.md, replacing the previous run's section."""

from __future__ import annotations

import datetime as dt
import platform
import re
import sys
from pathlib import Path

BENCHMARKS_MD = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"
HEADER = (
    "# Benchmarks\n\n"
    "Each section is written by the script named in it; re-run the command to refresh it. Figures are\n"
    "measured on the machine named in the section, never edited by hand.\n"
)


def write_section(
    name: str, body_markdown: str, *, command: str | None = None, measured_at: dt.datetime | None = None
) -> None:
    """Replace (or append) the section `name` with `body_markdown`, stamped with command, date and host.

    `measured_at` is when the figures were measured, for a section written later from a saved report
    (default: now).
    """
    command = command or "python " + " ".join(sys.argv)
    stamp = (measured_at or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    host = f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}"
    try:
        import os

        host += f", {os.cpu_count()} CPUs"
    except Exception:  # pragma: no cover
        pass
    section = (
        f"<!-- section:{name} -->\n## {name}\n\n"
        f"Command: `{command}`  \nMeasured: {stamp} on {host}\n\n{body_markdown.strip()}\n"
        f"<!-- /section:{name} -->\n"
    )
    BENCHMARKS_MD.parent.mkdir(parents=True, exist_ok=True)
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else HEADER
    pattern = re.compile(rf"<!-- section:{re.escape(name)} -->.*?<!-- /section:{re.escape(name)} -->\n", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    BENCHMARKS_MD.write_text(text)
