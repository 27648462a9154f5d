"""Writing the end-to-end section of docs/BENCHMARKS.md (through benchmarks/_report.py of the checkout)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from srift.errors import EnvironmentProblem
from srift.settings import REPO_ROOT


def section_name(report: Mapping[str, Any]) -> str:
    """The run's section: the shipped models' run, or (with any user model) the user models' run."""
    yours = ", your models" if report.get("user_models") else ""
    where = " across locations" if report.get("testbed", {}).get("spec", {}).get("locations") else ""
    return f"end-to-end accuracy{where} ({report['level']} matrix, testbed{yours})"


def write_benchmark_section(report: Mapping[str, Any], body: str) -> None:
    """Replace this level's section (quick or full) in docs/BENCHMARKS.md with `body`."""
    path = REPO_ROOT / "benchmarks" / "_report.py"
    spec = importlib.util.spec_from_file_location("srift_benchmarks_report", path)
    if not path.is_file() or spec is None or spec.loader is None:
        raise EnvironmentProblem(
            f"{path} is missing", hint="write benchmarks from a source checkout of srift"
        )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_section(section_name(report), body, command=report.get("command") or None)
