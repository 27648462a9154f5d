"""The estimator's calibration: roofline efficiencies, per-model factors and measured error spreads.

Shipped as `srift/estimate/data/calibration.json`, written by `python -m benchmarks.public_gpus
--write-calibration` from the public single-GPU throughput table (`srift.estimate.public`), which it reads
through the measurement registry (srift/data/measurements.yaml: sets `lambdal-single-gpu`, the fit's rows,
and `eager-kernel-overhead`); a test checks that the shipped file is what the fit gives. Fields:

- `efficiency`: fractions of peak FLOP/s and bandwidth and the HBM bandwidth factor
  (`srift.estimate.roofline.Efficiency`), fitted on every model and GPU of the table together;
  `kernel_s`, the host time of one eager kernel, is measured (see its `kernel_source`), not fitted.
- `factors`: for the table's models, a time factor per precision group (fp32/tf32 rows and fp16/bf16
  rows) that the roofline times of that model are multiplied by: the model's own inefficiency or
  efficiency (cuDNN convolutions, fused kernels, input pipeline) measured on the table's GPUs. Models
  not in the table use factor 1: the pooled roofline. The factors' logarithms average to zero per group.
- `spreads`: relative 1-σ errors measured out of sample, leaving one accelerator out: `model` for models
  with a factor, `pooled` for models without, `scaled` for a profile measured on one other GPU scaled
  by the two GPUs' roofline times. They become the estimates' `spread`, which widens prediction bands.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from srift.domain.structure import Precision
from srift.estimate.roofline import Efficiency

GROUPS = ("fp32", "fp16")


def precision_group(precision: Precision) -> str:
    """fp16 for the autocast precisions (fp16, bf16), fp32 for fp32 and tf32."""
    return "fp16" if precision.autocast else "fp32"


@dataclass(frozen=True, slots=True)
class Calibration:
    """See the module docstring."""

    name: str
    efficiency: Efficiency
    factors: dict[str, float] = field(hash=False)
    spreads: dict[str, float] = field(hash=False)
    fitted_on: str
    kernel_source: str
    checks: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def factor(self, model: str, precision: Precision) -> float | None:
        """The table's time factor for `model` in `precision`'s group, None when the model is not in it."""
        return self.factors.get(f"{model}/{precision_group(precision)}")

    def to_dict(self) -> dict[str, Any]:
        e = self.efficiency
        return {
            "format": "srift-estimate-calibration/1",
            "name": self.name,
            "efficiency": {
                "compute": e.compute,
                "matmul_memory": e.matmul_memory,
                "other_memory": e.other_memory,
                "kernel_s": e.kernel_s,
                "hbm_bandwidth": e.hbm_bandwidth,
            },
            "kernel_source": self.kernel_source,
            "factors": dict(sorted(self.factors.items())),
            "spreads": dict(sorted(self.spreads.items())),
            "fitted_on": self.fitted_on,
            "checks": self.checks,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        e = data["efficiency"]
        return cls(
            name=str(data["name"]),
            efficiency=Efficiency(
                compute=float(e["compute"]),
                matmul_memory=float(e["matmul_memory"]),
                other_memory=float(e["other_memory"]),
                kernel_s=float(e["kernel_s"]),
                hbm_bandwidth=float(e.get("hbm_bandwidth", 1.0)),
            ),
            factors={str(k): float(v) for k, v in data["factors"].items()},
            spreads={str(k): float(v) for k, v in data["spreads"].items()},
            fitted_on=str(data["fitted_on"]),
            kernel_source=str(data["kernel_source"]),
            checks=dict(data.get("checks") or {}),
        )


@functools.lru_cache(maxsize=1)
def shipped_calibration() -> Calibration:
    """The shipped calibration (read once)."""
    text = resources.files("srift.estimate").joinpath("data/calibration.json").read_text()
    return Calibration.from_dict(json.loads(text))
