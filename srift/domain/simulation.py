"""The served simulator's configuration: how gradients are exchanged, as the user's DDP settings say.

Every prediction, plan, re-plan, dashboard answer and `srift validate` case runs the simulator with one
`SimConfig`; the default (`SERVED`) is what PyTorch DistributedDataParallel does out of the box. A request
may change what a user can change in DDP (`bucket_cap_mb`) or ask for the Srift paper's per-layer exchange.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from srift.errors import InvalidInput

DDP_BUCKET_CAP_MB = 25.0
"""DistributedDataParallel's default `bucket_cap_mb` in MiB (torch/nn/parallel/distributed.py)."""

DDP_FIRST_BUCKET_BYTES = 1 << 20
"""`torch.distributed._DEFAULT_FIRST_BUCKET_BYTES`: DDP's first bucket holds about 1 MiB, so the first
allreduce starts early in the backward pass."""

MAX_BUCKET_CAP_MB = 1 << 16
"""64 GiB: larger than any model's gradients, i.e. one bucket for everything."""


class Exchange(StrEnum):
    """How the simulator groups gradients into allreduces."""

    DDP_BUCKETS = "ddp_buckets"
    """PyTorch DDP: gradients copied into buckets of `bucket_cap_mb` (the first about 1 MiB), filled in the
    order gradients become ready (the order DDP rebuilds its buckets to after the first iteration), each
    reduced once all of its gradients are ready."""
    PER_LAYER = "per_layer"
    """The Srift paper's model (§4.3): one allreduce per layer, as soon as its gradient is ready."""


@dataclass(frozen=True, slots=True)
class SimConfig:
    """The simulator settings a request may change; `SERVED` is the default every answer uses."""

    exchange: Exchange = Exchange.DDP_BUCKETS
    bucket_cap_mb: float = DDP_BUCKET_CAP_MB

    def __post_init__(self) -> None:
        if not (math.isfinite(self.bucket_cap_mb) and 0 < self.bucket_cap_mb <= MAX_BUCKET_CAP_MB):
            raise InvalidInput(
                f"bucket_cap_mb {self.bucket_cap_mb!r} is not in (0, {MAX_BUCKET_CAP_MB}]",
                hint="use the bucket_cap_mb your DistributedDataParallel is given "
                f"(default {DDP_BUCKET_CAP_MB:g})",
                field="bucket_cap_mb",
            )

    @property
    def bucket_cap_bytes(self) -> int | None:
        """Bytes per DDP bucket, or None for the per-layer exchange."""
        if self.exchange is Exchange.PER_LAYER:
            return None
        return int(self.bucket_cap_mb * 2**20)

    def label(self) -> str:
        """What the answers' `sources` say about the exchange."""
        if self.exchange is Exchange.PER_LAYER:
            return "exchange:per_layer"
        return f"exchange:ddp_buckets({self.bucket_cap_mb:g} MiB, first {DDP_FIRST_BUCKET_BYTES >> 20} MiB)"


SERVED = SimConfig()
"""What every answer uses unless the request says otherwise: PyTorch DDP's defaults."""

PER_LAYER = SimConfig(exchange=Exchange.PER_LAYER)
"""The Srift paper's per-layer exchange."""
