"""No import circles anywhere in srift: every module can be imported before the modules that import it."""

from __future__ import annotations

import graphlib

import grimp


def test_srift_modules_import_one_another_without_a_circle() -> None:
    """Every import counts (module level, inside functions and under TYPE_CHECKING); a package's
    `__init__` counts as the package, so `from srift.sim import x` inside srift.sim is a circle too."""
    graph = grimp.build_graph("srift")
    sorter = graphlib.TopologicalSorter(
        {module: graph.find_modules_directly_imported_by(module) & graph.modules for module in graph.modules}
    )
    try:
        sorter.prepare()
    except graphlib.CycleError as error:
        circle = " -> ".join(error.args[1])
        raise AssertionError(f"an import circle: {circle}") from None
