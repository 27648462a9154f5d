"""No two public classes in srift share a name: an import or a traceback names one class, not one of two."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRIFT = Path(__file__).resolve().parents[1] / "srift"


def public_classes() -> dict[str, list[str]]:
    """Every module-level class whose name does not start with `_`, by name: the modules that define it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(SRIFT.rglob("*.py")):
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found[node.name].append(str(path.relative_to(SRIFT.parent)))
    return found


def test_no_two_public_classes_share_a_name() -> None:
    classes = public_classes()
    assert len(classes) > 300  # the scan reads the package, not an empty folder
    clashes = {name: paths for name, paths in classes.items() if len(paths) > 1}
    assert not clashes, clashes
