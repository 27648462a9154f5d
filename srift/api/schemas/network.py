"""The `network` object of plan and prediction requests and answers: transport, library, measured rates."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from srift.api.schemas.types import TypeName
from srift.documents import StrictModel
from srift.domain.network import Library, Transport

Gbps = Annotated[float, Field(gt=0, le=100_000, description="Gbit/s, one direction, node to node")]
MAX_MEASURED = 64
MAX_PROBE_JOBS = 16
MAX_FLOWS = 64
"""NCCL docs: NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD cannot exceed 64."""


class NetworkIn(StrictModel):
    """How the nodes talk. The default is what plain PyTorch DDP does on EC2: NCCL over TCP sockets,
    outside a cluster placement group. NCCL opens 8 × 2 = 16 sockets per peer only when it can read the
    ENA's PCI vendor id (bare VM, or a container on the host network) and one otherwise (a container with
    its own network namespace); unless `ena_visible` or `flows_per_peer` says which, the prior assumes one
    (the deadline-safe end) and widens its band's fast side up to the 16-socket rate."""

    model_config = ConfigDict(extra="forbid")

    transport: Transport = Field(
        default=Transport.TCP,
        description="tcp: sockets (plain PyTorch DDP over NCCL or gloo); efa: aws-ofi-nccl on EFA types",
    )
    library: Library = Field(default=Library.NCCL, description="nccl or gloo")
    placement_group: bool = Field(
        default=False,
        description="instances in one cluster placement group (AWS: 10 instead of 5 Gbit/s per TCP flow)",
    )
    flows_per_peer: int | None = Field(
        default=None,
        ge=1,
        le=MAX_FLOWS,
        description="TCP flows per peer (NCCL_NSOCKS_PERTHREAD × NCCL_SOCKET_NTHREADS); default: the "
        "library's (NCCL on AWS: 16 with ena_visible true, else 1; elsewhere 1; gloo 1)",
    )
    ena_visible: bool | None = Field(
        default=None,
        description="NCCL on AWS: true when NCCL can read the ENA's PCI vendor id (bare VM or host "
        "network: 16 sockets per peer), false in a container with its own network namespace (1 socket); "
        "null: not known — the prior assumes 1 and its band reaches the 16-socket rate",
    )
    measured_gbps: dict[TypeName, Gbps] | None = Field(
        default=None,
        max_length=MAX_MEASURED,
        description="instance type → measured node-to-node Gbit/s; replaces the prior for that type",
    )
    probe_job_ids: list[Annotated[int, Field(ge=1, le=2**31 - 1)]] | None = Field(
        default=None,
        max_length=MAX_PROBE_JOBS,
        description="stored probe jobs whose multi-node samples give measured rates (e.g. from "
        "`srift probe run --quick`)",
    )


class NodeRateOut(BaseModel):
    instance_type: str
    gbps: float | None = Field(description="node-to-node Gbit/s assumed (null: a learned model answers)")
    high_gbps: float | None = Field(
        default=None,
        description="the fastest rate the public facts allow under the request (the band's fast end); "
        "null when it equals gbps",
    )
    limit: str = Field(description="what bounds it, e.g. 'TCP: 1 flow(s) × 5 Gbit/s per flow'")
    source: str = Field(description="measured, prior:alpha-beta, or the learned model's version")


class NetworkOut(BaseModel):
    """What the answer assumed between nodes."""

    transport: Transport
    library: Library
    placement_group: bool
    flows_per_peer: dict[str, int] = Field(description="TCP flows per peer per instance type")
    label: str
    rates: list[NodeRateOut]
    recommendation: str | None = Field(
        description="how to replace prior-based rates by measurements (null when nothing rests on the prior)"
    )
    sources: list[str] = Field(default_factory=list)
