"""No code calls a route function: what two routes share lives in a service (route → service → repository)."""

from __future__ import annotations

import ast
from pathlib import Path

import srift

SRIFT = Path(srift.__file__).resolve().parent
ROUTES = SRIFT / "api" / "routes"


def _is_route(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether `fn` is decorated `@router.<method>(...)`."""
    return any(
        isinstance(d, ast.Call)
        and isinstance(d.func, ast.Attribute)
        and isinstance(d.func.value, ast.Name)
        and d.func.value.id == "router"
        for d in fn.decorator_list
    )


def _route_functions() -> dict[str, set[str]]:
    """Per route module (its name under srift.api.routes), the names of its route functions."""
    out = {}
    for path in sorted(ROUTES.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        out[path.stem] = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _is_route(node)
        }
    return out


def _route_calls(path: Path, routes: dict[str, set[str]]) -> list[str]:
    """The calls in `path` to a route function: its own (for a route module), one imported by name, or one
    reached through an imported route module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    functions = set(routes.get(path.stem, set())) if path.parent == ROUTES else set()
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "srift.api.routes":
            modules.update({a.asname or a.name: a.name for a in node.names if a.name in routes})
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("srift.api.routes."):
            own = routes.get((node.module or "").rsplit(".", 1)[1], set())
            functions |= {a.asname or a.name for a in node.names if a.name in own}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in functions:
            found.append(f"{path.relative_to(SRIFT)}:{node.lineno} {func.id}()")
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.attr in routes.get(modules.get(func.value.id, ""), set())
        ):
            found.append(f"{path.relative_to(SRIFT)}:{node.lineno} {func.value.id}.{func.attr}()")
    return found


def test_route_functions_are_found() -> None:
    routes = _route_functions()
    assert {"list_probe_jobs", "list_profile_jobs"} <= routes["probe_jobs"]
    assert sum(len(names) for names in routes.values()) > 20


def test_no_code_calls_a_route_function() -> None:
    """GET /v1/profile-jobs answered by calling the GET /v1/probe-jobs route function (its dependencies
    passed by hand); both now call `srift.services.jobs.job_page`."""
    routes = _route_functions()
    found = [call for path in sorted(SRIFT.rglob("*.py")) for call in _route_calls(path, routes)]
    assert found == []
