"""Instance types and priced offers: what can be rented, and at what price."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from enum import StrEnum


class Market(StrEnum):
    """How an instance is bought."""

    SPOT = "spot"
    ON_DEMAND = "on_demand"


class Lifecycle(StrEnum):
    """Where an instance family stands with its provider (srift.catalog.support has the facts)."""

    CURRENT = "current"
    PREVIOUS = "previous"
    RETIRED = "retired"


class MarketChoice(StrEnum):
    """Which markets a request allows."""

    SPOT = "spot"
    ON_DEMAND = "on_demand"
    ANY = "any"

    def allows(self, market: Market) -> bool:
        return self is MarketChoice.ANY or self.value == market.value


class Interconnect(StrEnum):
    """How the GPUs inside one instance talk to each other."""

    NONE = "none"
    PCIE = "pcie"
    NVLINK = "nvlink"
    NVSWITCH = "nvswitch"


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


@dataclass(frozen=True, slots=True)
class InstanceType:
    """One VM type of one provider.

    Units: `gpu_memory_gib` per GPU, `memory_gib` host RAM, `network_gbps` the provider's rated network
    bandwidth in gigabits/s (a burst ceiling when `network_burst`), `interconnect_gbps` the per-GPU
    intra-node bandwidth in gigabits/s. `accelerator` is the key that compute profiles are matched on:
    the GPU model for GPU types, or the type's own name for CPU and testbed types.
    """

    provider: str
    name: str
    gpu_model: str | None
    gpu_count: int
    gpu_memory_gib: float
    vcpus: int
    memory_gib: float
    network_gbps: float
    network_burst: bool
    interconnect: Interconnect
    interconnect_gbps: float
    efa: bool

    @property
    def accelerator(self) -> str:
        return self.gpu_model if self.gpu_model else self.name

    @property
    def devices(self) -> int:
        """Data-parallel ranks on one instance: its GPUs, or 1 for a CPU-only type."""
        return max(self.gpu_count, 1)

    def matches_accelerator(self, accelerator: str) -> bool:
        """True when a profile made on `accelerator` applies to this type.

        Matches the type name exactly (testbed and CPU profiles use `--accelerator TYPE`), or the GPU model
        as a whole word inside a device name, so "Tesla T4" and "NVIDIA T4" match gpu_model "T4". A device
        name that states a memory size ("A100-SXM4-80GB") matches only types whose GPUs have about that much
        (within 20 %: EC2 reports a little less than the datasheet), so an 80 GB profile is not used for a
        40 GB A100.
        """
        wanted = accelerator.strip().lower()
        if wanted == self.name.lower():
            return True
        if not self.gpu_model:
            return False
        model = self.gpu_model.lower()
        if _norm(wanted) == _norm(model):
            return True
        if re.search(rf"(^|[^a-z0-9]){re.escape(model)}([^a-z0-9]|$)", wanted) is None:
            return False
        stated = re.search(r"(\d+)\s*gb", wanted)
        if stated is None or self.gpu_memory_gib <= 0:
            return True
        return abs(float(stated.group(1)) - self.gpu_memory_gib) <= 0.2 * float(stated.group(1))


@dataclass(frozen=True, slots=True)
class Offer:
    """An instance type at a price in one region and market, with where the price came from."""

    instance: InstanceType
    region: str
    market: Market
    price_usd_per_hr: float
    source: str
    as_of: date

    @property
    def price_usd_per_s(self) -> float:
        return self.price_usd_per_hr / 3600.0
