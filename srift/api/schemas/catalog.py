"""Response schemas of GET /v1/instance-types (catalog entries with their prices)."""

from __future__ import annotations

from datetime import date
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from srift.domain.catalog import Interconnect, Lifecycle


class PriceOut(BaseModel):
    """One price with its provenance."""

    model_config = ConfigDict(extra="forbid")

    price_usd_per_hr: float = Field(gt=0, description="USD per instance-hour")
    source: str = Field(description="where the price comes from")
    as_of: date = Field(description="date the price was valid")


class PricesOut(BaseModel):
    """Prices by market; null where the market has no price in this region."""

    model_config = ConfigDict(extra="forbid")

    on_demand: PriceOut | None = None
    spot: PriceOut | None = None


class InstanceTypeOut(BaseModel):
    """An instance type in one region: specs (units in names) and current prices."""

    model_config = ConfigDict(extra="forbid")

    provider: str
    name: str = Field(description="instance type, e.g. p3.8xlarge")
    region: str
    gpu_model: str | None = Field(description="GPU model, e.g. V100; null for CPU-only types")
    gpu_count: int = Field(ge=0)
    gpu_memory_gib: float = Field(ge=0, description="GiB per GPU")
    vcpus: int = Field(ge=1)
    memory_gib: float = Field(gt=0, description="host memory, GiB")
    network_gbps: float = Field(gt=0, description="rated network bandwidth, gigabits/s")
    network_burst: bool = Field(description="true when network_gbps is an 'up to' burst ceiling")
    interconnect: Interconnect = Field(description="how the GPUs inside one instance are linked")
    interconnect_gbps: float = Field(
        ge=0, description="per-GPU intra-node bandwidth, gigabits/s, one direction"
    )
    efa: bool = Field(description="supports Elastic Fabric Adapter (or another RDMA fabric)")
    accelerator: str = Field(
        description="the key compute profiles are matched on: GPU model, or the type name"
    )
    compute_capability: str | None = Field(
        default=None, description="the GPUs' CUDA compute capability, e.g. 8.0; null for CPU types"
    )
    status: Lifecycle = Field(
        default=Lifecycle.CURRENT,
        description="current, previous (generation) or retired (no longer offered), as of the prices",
    )
    snapshot: str = Field(description="catalog snapshot the specs come from")
    extra: dict[str, Any] = Field(
        default_factory=dict, description="free-form facts (notes, baseline bandwidth)"
    )
    prices: PricesOut
