"""Single-node DDP efficiency that the simulator does not explain, per GPU link class (issue #55).

Public DDP runs of 1–8 GPUs in one node (Lambda's raw run logs, registry set `lambdal-raw-runs`) lose a
little more than the simulated all-reduce accounts for: paired with their 1-GPU run at the same per-GPU batch,
an N-GPU run's published efficiency is, in the median, a few percent below Srift's predicted one (NVSwitch
about 1 %, PCIe about 3 %, V100 NVLink about 8 %). η(link) is that residual: the median over every pair of one
link class of published efficiency / Srift's predicted efficiency (capped at 1: never faster than Srift's
own prediction). On a node of two or more GPUs of a known GPU spec whose link class has an η, each GPU's
compute (forward + backward from its profile) is divided by η (`NodeEfficiency.of`, applied where the
simulator takes a member's compute from its profile, `srift.sim.iteration.Members`). Nodes of one GPU, CPU
and testbed types, and links without an η get 1: their figures do not move.

Which table a simulation uses is one of its inputs (`srift.sim.IterationInputs.node_efficiency`, the
`node_efficiency` argument of `srift.sim.simulate`): the shipped one unless the caller passes another (the
fit simulates `UNCORRECTED`, a leave-one-GPU-out check a table fitted without that GPU).

The shipped values are `srift/data/node_efficiency.json`, written by `python -m benchmarks.public_gpus
--write-node-efficiency` (the fit, `srift.validation.node_efficiency`, reads the raw runs only through the
measurement registry; a test checks the shipped file is what the fit gives).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from srift.catalog.accelerators import spec_for_accelerator, spec_for_instance
from srift.domain import InstanceType

FILE = "data/node_efficiency.json"
"""The shipped η per link class, relative to the srift package."""
FORMAT = "srift-node-efficiency/1"


@dataclass(frozen=True, slots=True)
class NodeEfficiency:
    """η per GPU link class (`srift.domain.Interconnect` values), and what it was fitted on."""

    by_link: Mapping[str, float] = field(hash=False)
    fitted_on: str = ""

    def of(self, instance: InstanceType) -> float:
        """η for `instance`'s node: its link class's η where it has two or more GPUs of a known spec and
        the class has one, else 1 (the simulator's compute as the profile gives it)."""
        if instance.gpu_count < 2 or not _real_gpu(instance):
            return 1.0
        return self.by_link.get(instance.interconnect.value, 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "by_link": dict(sorted(self.by_link.items())), "fitted_on": self.fitted_on}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeEfficiency:
        return cls(
            by_link={str(k): float(v) for k, v in data["by_link"].items()},
            fitted_on=str(data.get("fitted_on", "")),
        )


UNCORRECTED = NodeEfficiency(by_link={}, fitted_on="none: the simulator's compute as the profile gives it")
"""No correction: what the fit simulates with (η is the residual of these predictions)."""


@functools.lru_cache(maxsize=1024)
def _real_gpu(instance: InstanceType) -> bool:
    """Whether `instance` has GPUs of a spec Srift knows (by its GPU model, or the model as a spec name)."""
    if not instance.gpu_model:
        return False
    return spec_for_instance(instance) is not None or spec_for_accelerator(instance.gpu_model) is not None


@functools.lru_cache(maxsize=1)
def shipped_node_efficiency() -> NodeEfficiency:
    """The shipped η per link class (read once)."""
    return NodeEfficiency.from_dict(json.loads(resources.files("srift").joinpath(FILE).read_text()))
