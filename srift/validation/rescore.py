"""Re-predicting a stored `srift validate` run with the current code: how a modelling change is judged.

The measurements of a run do not depend on the simulator, and its work folder keeps what the predictions
read (the database with the profiles, the testbed's instance types, the probe samples and the bandwidth
model version). `rescore` predicts every case of the report again from them, with the co-location factors
its runs measured, so the pooled figures before and after a change compare like with like
(srift.validation.protocol, `benchmarks/end_to_end.py --pool ... --rescore`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from srift.errors import EnvironmentProblem
from srift.settings import get_settings
from srift.testbed import parse_spec
from srift.validation import stats
from srift.validation.colocation import ColocationFactors
from srift.validation.context import BandwidthSource, Effort
from srift.validation.matrix import Fleet, Group
from srift.validation.steps import CaseInputs, predict_case

_GROUP = re.compile(r"^(\d+)×(\S+)@(\d+)(?: \[(\S+)\])?$")


def case_fleet(label: str) -> Fleet:
    """The fleet of a case's label, e.g. "2×tbv.small@16 + 2×tbv.large@48" (with " [east]" per group when
    it spans locations). ValueError for anything else."""
    groups = []
    for part in label.split(" + "):
        found = _GROUP.match(part.strip())
        if found is None:
            raise ValueError(f"not a fleet label: {label!r}")
        count, type_name, batch, location = found.groups()
        groups.append(Group(type_name, int(count), int(batch), location))
    return Fleet(tuple(groups))


def case_colocation(row: Mapping[str, Any]) -> ColocationFactors | None:
    """The co-location factors the case's runs measured, as the run used them; None where none."""
    found = row.get("colocation")
    if not found:
        return None
    return ColocationFactors(
        factors=tuple(found["factors"]),
        ratios=tuple(tuple(r) for r in found["ratios"]),
        straggler_cv=tuple(found["straggler_cv"]),
    )


def rescore(report: Mapping[str, Any], *, workdir: Path | None = None) -> dict[str, Any]:
    """A copy of `report` with every measured case predicted again by the current code (`predicted`,
    `error`, `per_layer_error`); EnvironmentProblem when the run's work folder is gone."""
    folder = Path(workdir or report["workdir"])
    database = folder / "validate.db"
    if not database.is_file():
        raise EnvironmentProblem(
            f"{database} is missing: the run's work folder holds what its predictions read",
            hint="keep the work folders of the runs you pool (srift validate --workdir DIR), or re-run them",
        )
    url = f"sqlite:///{database}"
    settings = get_settings().model_copy(update={"database_url": url, "models_dir": folder / "models"})
    inputs = CaseInputs(
        url=url,
        settings=settings,
        spec=parse_spec(report["testbed"]["spec"]),
        profile_ids={(p["model"], p["instance_type"]): int(p["profile_id"]) for p in report["profiles"]},
        effort=Effort.full() if report.get("level") == "full" else Effort.quick(),
        seed=int(report.get("seed", 0)),
        bandwidth=BandwidthSource(report.get("bandwidth_source", BandwidthSource.PROBE.value)),
    )
    out = copy.deepcopy(dict(report))
    for row in out["cases"]:
        measured = row.get("measured_iteration_s")
        if measured is None:
            continue
        row["predicted"] = predict_case(
            inputs,
            row["model"],
            case_fleet(row["fleet"]),
            case_colocation(row),
            strategy=row.get("strategy", "ddp"),
            overheads=row.get("sharded_overhead_s"),
        )
        row["error"] = stats.relative_error(row["predicted"]["iteration_s"], measured)
        row["per_layer_error"] = stats.relative_error(row["predicted"]["per_layer_iteration_s"], measured)
        if row.get("strategy", "ddp") != "ddp":
            from srift.validation.sharded import memory_errors

            memory_errors(row)
    return out
