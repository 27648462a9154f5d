"""The test suite and the package import nothing from benchmarks/: the scripts there may change or go
without breaking a test, and an installed srift (which has no benchmarks/) imports cleanly.

Shared harness code lives in srift/testing/; tests run a benchmark as a command
(`python -m benchmarks.load ...`), never by importing it."""

from __future__ import annotations

import ast

import pytest

from srift.settings import REPO_ROOT

IMPORTERS = ("importlib.import_module", "import_module", "__import__")


def _is_benchmarks(module: str) -> bool:
    return module == "benchmarks" or module.startswith("benchmarks.")


def benchmark_imports(source: str, filename: str = "<string>") -> list[str]:
    """Every import of `benchmarks` in `source`: `import`, `from ... import`, and import_module/__import__
    called with a literal name; as "line N: what"."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in IMPORTERS and node.args:
            first = node.args[0]
            names = [first.value] if isinstance(first, ast.Constant) and isinstance(first.value, str) else []
        else:
            continue
        found += [(node.lineno, name) for name in names if _is_benchmarks(name)]
    return [f"line {line}: {name}" for line, name in sorted(found)]


def test_the_detector_finds_every_form_of_import() -> None:
    source = "\n".join(
        [
            "import benchmarks.load",
            "import os, benchmarks",
            "from benchmarks.load import start_server",
            "from benchmarks import load",
            "def f():",
            "    import importlib",
            "    return importlib.import_module('benchmarks.plan_cases')",
            "__import__('benchmarks')",
            "import benchmarks_extra",
            "from srift.validation.benchmarks import write_section",
            "from .benchmarks import x",
            "text = 'from benchmarks import nothing'",
        ]
    )
    assert benchmark_imports(source) == [
        "line 1: benchmarks.load",
        "line 2: benchmarks",
        "line 3: benchmarks.load",
        "line 4: benchmarks",
        "line 7: benchmarks.plan_cases",
        "line 8: benchmarks",
    ]


@pytest.mark.parametrize("tree", ["srift", "tests"])
def test_nothing_under_the_tree_imports_benchmarks(tree: str) -> None:
    files = sorted((REPO_ROOT / tree).rglob("*.py"))
    assert len(files) > 20
    offenders = {
        str(path.relative_to(REPO_ROOT)): found
        for path in files
        if (found := benchmark_imports(path.read_text(), str(path)))
    }
    assert offenders == {}, "move shared code to srift/testing/ or run the benchmark as a command"
