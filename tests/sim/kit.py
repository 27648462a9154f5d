"""Real small bandwidth models, instance types and profiles for simulator tests (no mocks of Srift code)."""

from __future__ import annotations

from collections.abc import Sequence

from srift.domain import (
    BandwidthEstimate,
    ComputeCurve,
    FleetMember,
    InstanceType,
    Interconnect,
    LayerGrad,
    ModelProfile,
)


class TableBandwidth:
    """A BusBandwidthModel from two small tables (intra-node and network), scaled by `factor`.

    Each table maps a power-of-two size to Gbit/s; a size is answered with the entry of the largest key ≤ it
    (or the smallest key). Every call is recorded in `calls` so tests can check what the simulator asked.
    """

    def __init__(
        self,
        network: dict[int, float],
        intra: dict[int, float] | None = None,
        *,
        factor: float = 1.0,
        residual_cv: float = 0.0,
        source: str = "table:test",
    ) -> None:
        self.network = dict(sorted(network.items()))
        self.intra = dict(sorted((intra or network).items()))
        self.factor = factor
        self.residual_cv = residual_cv
        self.source = source
        self.calls: list[tuple[str, int, int, tuple[int, ...]]] = []

    def scaled(self, factor: float) -> TableBandwidth:
        return TableBandwidth(
            self.network,
            self.intra,
            factor=self.factor * factor,
            residual_cv=self.residual_cv,
            source=self.source,
        )

    @staticmethod
    def _lookup(table: dict[int, float], size: int) -> float:
        best = next(iter(table.values()))
        for key, value in table.items():
            if key <= size:
                best = value
        return best

    def predict(
        self,
        *,
        instance: InstanceType,
        world_size: int,
        nodes: int,
        buffer_bytes: Sequence[int],
        async_count: int = 1,
    ) -> BandwidthEstimate:
        self.calls.append((instance.name, world_size, nodes, tuple(buffer_bytes)))
        table = self.intra if nodes == 1 else self.network
        return BandwidthEstimate(
            busbw_gbps=tuple(self._lookup(table, s) * self.factor for s in buffer_bytes),
            source=self.source,
            residual_cv=self.residual_cv,
        )


def flat(gbps: float) -> TableBandwidth:
    """Every size, every level: `gbps`."""
    return TableBandwidth({1: gbps})


def instance(
    name: str,
    *,
    gpus: int = 1,
    gpu_model: str = "V100",
    network_gbps: float = 10.0,
    interconnect_gbps: float = 0.0,
    provider: str = "aws",
) -> InstanceType:
    return InstanceType(
        provider=provider,
        name=name,
        gpu_model=gpu_model,
        gpu_count=gpus,
        gpu_memory_gib=16.0,
        vcpus=8 * gpus,
        memory_gib=61.0 * gpus,
        network_gbps=network_gbps,
        network_burst=False,
        interconnect=Interconnect.NVLINK if gpus > 1 else Interconnect.NONE,
        interconnect_gbps=interconnect_gbps,
        efa=False,
    )


# Stash Table I: p3.2xlarge 1×V100 "up to 10" Gbit/s; p3.8xlarge 4×V100 NVLink, 10 Gbit/s.
P3_2XL = instance("p3.2xlarge", gpus=1, network_gbps=10.0)
P3_8XL = instance("p3.8xlarge", gpus=4, network_gbps=10.0, interconnect_gbps=300.0)


def profile(
    *,
    accelerator: str = "V100",
    fw_s: float = 0.1,
    bw_s: float = 0.2,
    layers: Sequence[tuple[int, float]] | Sequence[tuple[int, float, float]] = ((1_000_000_000, 0.5),),
    cv: float = 0.0,
    max_batch: int = 64,
    model: str = "toy",
) -> ModelProfile:
    """Compute ∝ batch (fw_s, bw_s at max_batch); layers: (grad_bytes, ready_frac[, exec_prob])."""
    grads = tuple(
        LayerGrad(
            name=f"l{i}", grad_bytes=spec[0], ready_frac=spec[1], exec_prob=spec[2] if len(spec) > 2 else 1.0
        )
        for i, spec in enumerate(layers)
    )
    return ModelProfile(
        model=model,
        accelerator=accelerator,
        max_batch=max_batch,
        forward=ComputeCurve((max_batch,), (fw_s,)),
        backward=ComputeCurve((max_batch,), (bw_s,)),
        layers=grads,
        straggler_cv=cv,
    )


def resnet_like(
    *, accelerator: str = "V100", cv: float = 0.036, fw_s: float = 0.04, bw_s: float = 0.08
) -> ModelProfile:
    """160 layers, ~100 MB, shaped like ResNet-50's: many small normalisation gradients, fewer large ones."""
    layers = []
    for i in range(160):
        size = 4 * (256 << (i % 4)) if i % 2 else 4 * 1024 * (1 + (i * 37) % 600)
        layers.append((size, (i + 1) / 160))
    return profile(
        accelerator=accelerator,
        fw_s=fw_s,
        bw_s=bw_s,
        layers=layers,
        cv=cv,
        max_batch=256,
        model="resnet-like",
    )


def member(inst: InstanceType, count: int, batch: int, prof: ModelProfile) -> FleetMember:
    return FleetMember(instance=inst, count=count, batch=batch, profile=prof)
