"""Request and response schemas of probe and profile jobs, and of results posted by their hosts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from srift.api.schemas.types import Timestamp
from srift.domain.states import JobKind, JobState
from srift.limits import MAX_EC2_COST_USD, MAX_EC2_INSTANCES, MAX_EC2_TIMEOUT_S

Text = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00]+$")]
TypeName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[^\x00]+$")]
BigInt = Annotated[int, Field(ge=-(2**62), le=2**62)]
Provider = Literal["local", "testbed", "ec2"]


class Ec2In(BaseModel):
    """Launch options and caps of an EC2 job (instances are always terminated; see docs)."""

    model_config = ConfigDict(extra="forbid")

    image_id: Text = Field(description="AMI with python3 (and CUDA drivers for NCCL), e.g. ami-0abc...")
    results_url: str = Field(
        min_length=8,
        max_length=500,
        pattern=r"^https?://[^\x00\s]+$",
        description="this server, as VMs see it",
    )
    region: Text = "us-east-1"
    market: Literal["on_demand", "spot"] = "on_demand"
    subnet_id: Text | None = None
    security_group_ids: list[Text] = Field(default_factory=list, max_length=10)
    key_name: Text | None = None
    iam_instance_profile: Text | None = None
    install_command: str | None = Field(
        default=None, min_length=1, max_length=2000, pattern=r"^[^\x00]+$", description="first user-data step"
    )
    max_instances: int = Field(default=8, ge=1, le=MAX_EC2_INSTANCES, description="instance cap of the job")
    max_cost_usd: float = Field(
        default=10.0, gt=0, le=MAX_EC2_COST_USD, description="cap on price × instances × timeout"
    )
    timeout_s: float = Field(
        default=3600, gt=0, le=MAX_EC2_TIMEOUT_S, description="instances are terminated after this"
    )


class ProbeJobIn(BaseModel):
    """An allreduce probe grid to run: one run per node count over the buffer sizes."""

    model_config = ConfigDict(extra="forbid")

    provider: Provider = Field(description="local (processes here), testbed (emulated hosts) or ec2")
    instance_type: TypeName = Field(description="a catalog type of the provider (testbed: provider testbed)")
    node_counts: list[BigInt] = Field(min_length=1, max_length=32, description="hosts per run, e.g. [2, 4]")
    sizes: list[BigInt] | None = Field(
        default=None, min_length=1, max_length=1024, description="buffer sizes in bytes (multiples of 4)"
    )
    repeats: BigInt = Field(default=5, description="timed repetitions per size (1..1000)")
    warmup: BigInt = Field(default=2, description="untimed allreduces per size")
    async_count: BigInt = Field(default=1, description="concurrent asynchronous allreduces")
    ranks_per_node: BigInt = Field(default=1, description="ranks on each host")
    backend: Literal["gloo", "nccl"] = "gloo"
    time_budget_s: float = Field(default=600.0, gt=0, le=86400, description="per run")
    testbed_prefix: Text | None = Field(default=None, description="use this running testbed's hosts")
    ec2: Ec2In | None = None


class ProfileJobIn(BaseModel):
    """A model to profile with `srift profile` on each instance type."""

    model_config = ConfigDict(extra="forbid")

    provider: Provider
    instance_type: TypeName | None = None
    instance_types: list[TypeName] | None = Field(default=None, min_length=1, max_length=16)
    model: Text = Field(description="MODULE:FACTORY returning the torch.nn.Module")
    input: Text = Field(description="MODULE:FACTORY of the batch size returning the input")
    loss: Text | None = None
    model_name: Text | None = None
    max_batch: BigInt | None = None
    repeats: BigInt = 7
    iterations: BigInt = 30
    time_budget_s: float = Field(default=1800.0, gt=0, le=86400)
    testbed_prefix: Text | None = None
    ec2: Ec2In | None = None
    extra_args: list[Text] = Field(default_factory=list, max_length=20)


class JobOut(BaseModel):
    """A probe or profile job: state queued → running → succeeded | failed, with its log."""

    id: int
    kind: JobKind
    provider: str
    state: JobState
    request: dict[str, Any]
    attempts: int
    worker_id: str | None
    created_at: Timestamp
    started_at: Timestamp | None
    heartbeat_at: Timestamp | None
    finished_at: Timestamp | None
    error: str | None
    log: str
    result: dict[str, Any]


class JobCreated(JobOut):
    """The queued job and its token, shown once: it lets hosts post this job's results."""

    token: str = Field(description="send as `Authorization: Bearer <token>` to POST /v1/probe-results")


class JobList(BaseModel):
    jobs: list[JobOut]
    total: int


class ProbeResultsIn(BaseModel):
    """Probe samples (JSON lines of probes/allreduce.py as objects), for a job or on their own."""

    model_config = ConfigDict(extra="forbid")

    job_id: int | None = Field(default=None, ge=1, le=2**31 - 1, description="the job these belong to")
    samples: list[dict[str, Any]] = Field(default_factory=list, max_length=10_000)
    final: bool = Field(default=True, description="false: stage this batch; the final batch stores all")
    error: str | None = Field(
        default=None, min_length=1, max_length=2000, pattern=r"^[^\x00]+$", description="the hosts failed"
    )


class ProbeResultsOut(BaseModel):
    parsed: int
    stored: int = Field(description="new samples (re-posting the same samples adds nothing)")
    staged: int = Field(description="samples waiting for the final batch")
    job_state: str | None


class ProfileResultIn(BaseModel):
    """One instance's profile for a profile job (or the error it hit)."""

    model_config = ConfigDict(extra="forbid")

    job_id: int | None = Field(default=None, ge=1, le=2**31 - 1)
    instance_type: TypeName | None = None
    profile: dict[str, Any] | None = None
    error: str | None = Field(default=None, min_length=1, max_length=2000, pattern=r"^[^\x00]+$")


class ProfileResultOut(BaseModel):
    profile_id: int | None
    job_state: str
