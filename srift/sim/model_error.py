"""The simulator's own error, as a band term: what is left of measured/predicted once every measured spread
is accounted for, from validation runs on models the simulator was not developed on.

Shipped as `srift/sim/shipped/model_error.json`, written by `python -m benchmarks.model_error REPORT...`
from `srift validate` reports (which runs, when, at which commit: inside the file). For each case of those
reports, x = ln(measured / p50); per fleet group (one host, one instance type, mixed types)

    σ² = max(0, mean(x²) − mean(σ_band²))

where σ_band is the case's own band without this term. mean(x²) is taken about 0, not about the mean of x:
the prediction does not correct a mean bias, so the band must cover it. This is the testbed's model error
(quarter- and half-core CPU hosts, gloo over shaped links): on other hardware it stands for the unknown
error of the same model until validation runs there say otherwise.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import Any

from srift.domain import FleetMember, SpreadTerm

SHIPPED = "shipped/model_error.json"
FORMAT = "srift-model-error/1"


class FleetGroup(StrEnum):
    """Fleets whose prediction errors behave alike: no exchange, one instance type, mixed types."""

    ONE_HOST = "one_host"
    ONE_TYPE = "one_type"
    MIXED = "mixed"

    @classmethod
    def of(cls, fleet: Sequence[FleetMember]) -> FleetGroup:
        if sum(m.count for m in fleet) < 2 and all(m.instance.devices < 2 for m in fleet):
            return cls.ONE_HOST
        return cls.ONE_TYPE if len({m.instance.name for m in fleet}) == 1 else cls.MIXED


@dataclass(frozen=True, slots=True)
class Case:
    """One validation case: its group, ln(measured / p50), and its band's σ without the model term."""

    group: FleetGroup
    log_ratio: float
    band_sigma: float


@dataclass(frozen=True, slots=True)
class ModelError:
    """σ of the simulator's error by fleet group (log scale), with where it was measured."""

    sigma: dict[str, float]
    cases: dict[str, int]
    provenance: dict[str, Any]

    def sigma_for(self, fleet: Sequence[FleetMember]) -> float:
        group = FleetGroup.of(fleet).value
        return self.sigma.get(group, self.sigma.get("all", 0.0))

    def term(self, fleet: Sequence[FleetMember]) -> SpreadTerm:
        s = self.sigma_for(fleet)
        return SpreadTerm(
            "model",
            s,
            s,
            f"the simulator's out-of-sample error on the testbed, {FleetGroup.of(fleet).value} fleets "
            "(srift/sim/shipped/model_error.json)",
        )

    @classmethod
    def fit(cls, cases: Iterable[Case], *, provenance: dict[str, Any]) -> ModelError:
        """σ per group and over all cases (see the module docstring)."""
        found = list(cases)
        sigma: dict[str, float] = {}
        counts: dict[str, int] = {}
        for name, members in [(g.value, [c for c in found if c.group is g]) for g in FleetGroup] + [
            ("all", found)
        ]:
            if not members:
                continue
            square = sum(c.log_ratio**2 for c in members) / len(members)
            own = sum(c.band_sigma**2 for c in members) / len(members)
            sigma[name] = math.sqrt(max(0.0, square - own))
            counts[name] = len(members)
        return cls(sigma=sigma, cases=counts, provenance=provenance)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "sigma": self.sigma, "cases": self.cases, "provenance": self.provenance}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelError:
        return cls(
            sigma={str(k): float(v) for k, v in data["sigma"].items()},
            cases={str(k): int(v) for k, v in data["cases"].items()},
            provenance=dict(data.get("provenance") or {}),
        )


def cases_from_report(report: dict[str, Any]) -> list[Case]:
    """The scored cases of a `srift validate` report (format srift-validation/1)."""
    out = []
    for row in report["cases"]:
        measured = row.get("measured_iteration_s")
        predicted = row["predicted"]
        if not measured or predicted["iteration_s"] <= 0:
            continue
        own = [t["sigma"] for t in predicted.get("band", {}).get("terms", []) if t["source"] != "model"]
        hosts = int(row["hosts"])
        group = (
            FleetGroup.ONE_HOST
            if hosts < 2
            else (FleetGroup.MIXED if row["type_group"] == "mixed" else FleetGroup.ONE_TYPE)
        )
        out.append(
            Case(
                group=group,
                log_ratio=math.log(measured / predicted["iteration_s"]),
                band_sigma=math.sqrt(sum(s * s for s in own)),
            )
        )
    return out


@functools.lru_cache(maxsize=1)
def shipped_model_error() -> ModelError:
    """The shipped model error (read once, on first use)."""
    text = resources.files("srift.sim").joinpath(SHIPPED).read_text()
    return ModelError.from_dict(json.loads(text))
