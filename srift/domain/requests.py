"""What users ask the services for, as frozen values: plan and prediction queries, training-run reports.

The edges (REST bodies in `srift.api.schemas`, request files read by the CLI) validate documents with their
bounds and produce these; services take nothing else. Field names are the documents' field names, so a
new request field is one field here and one in the schema (see `srift.documents.read_document`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from srift.documents import copy_fields
from srift.domain.catalog import Market, MarketChoice
from srift.domain.geo import AllreducePattern
from srift.domain.network import Library, Transport
from srift.domain.planning import DEFAULT_CONFIDENCE, BatchPolicy, CommMode, Objective, SearchMode
from srift.domain.profile import InputPipeline
from srift.domain.sharding import StrategyChoice
from srift.domain.simulation import DDP_BUCKET_CAP_MB, Exchange, SimConfig
from srift.domain.structure import Precision
from srift.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class ProfileSelection:
    """Which compute profiles a request uses: exactly one of stored `profile_ids`, inline `profiles`
    (documents as `srift profile` writes them), or every stored profile of `model`; in `precision`
    (None: the profiles' own, fp32 first for a model stored in several). `owner` is who asks (the API
    token's name; None: anonymous): a `model` lookup uses its own profiles and everyone's, never another
    owner's, and ids name only profiles it may read."""

    profile_ids: tuple[int, ...] | None = None
    profiles: tuple[Mapping[str, Any], ...] | None = None
    model: str | None = None
    precision: Precision | None = None
    owner: str | None = None

    def check(self) -> None:
        """InvalidInput unless exactly one way is given, and not an empty list."""
        given = [x is not None for x in (self.profile_ids, self.profiles, self.model)]
        if sum(given) != 1:
            raise InvalidInput(
                "give exactly one of profile_ids, profiles or model",
                hint="name stored profiles by id, inline profile documents, or a model with stored profiles",
                field="profile_ids",
            )
        if self.profile_ids is not None and not self.profile_ids:
            raise InvalidInput("is empty", hint="list at least one stored profile id", field="profile_ids")
        if self.profiles is not None and not self.profiles:
            raise InvalidInput("is empty", hint="inline at least one profile document", field="profiles")


@dataclass(frozen=True, slots=True)
class LinkQuery:
    """A measured link between two locations given with a request: one TCP stream's Gbit/s, ping in ms."""

    from_: str
    to: str
    bandwidth_gbps: float
    rtt_ms: float


@dataclass(frozen=True, slots=True)
class NetworkQuery:
    """How the nodes talk, as a request gives it (see srift.domain.network.NetworkSpec): measured rates per
    type, or stored probe jobs to read them from."""

    transport: Transport = Transport.TCP
    library: Library = Library.NCCL
    placement_group: bool = False
    flows_per_peer: int | None = None
    ena_visible: bool | None = None
    measured_gbps: Mapping[str, float] | None = None
    probe_job_ids: tuple[int, ...] | None = None


DEFAULT_TORCH = "2.13"
"""The PyTorch version this project is built and tested with (pyproject pins torch 2.13.0)."""
DEFAULT_CUDA = "12.6"
"""PyTorch's CUDA 12.6 wheels: of its official builds the one that runs the most GPUs (compute capability
5.0 to 9.0 in the release 2.11 support matrix, dev-discuss.pytorch.org 2026-01-15; kept as the legacy
build through release 2.14, pytorch/pytorch#190385)."""


DEFAULT_LOG_TICK_S = 60.0
"""A user's interruption log is sampled once a minute unless `tick_s` says otherwise (a choice, not a fact):
a plan request's inline `recent_market.log_csv` and `srift traces import` (srift.spot.traces)."""


@dataclass(frozen=True, slots=True)
class RecentMarket:
    """The recent spot market a plan's spot figures are conditioned on (srift.spot.nowcast): an imported
    `trace` by name (as `srift traces list` names it) or an inline `log_csv` (the CSV `srift traces import`
    reads, sampled every `tick_s`), up to `as_of_s` seconds after the log's first tick (None: its end)."""

    trace: str | None = None
    log_csv: str | None = None
    tick_s: float = DEFAULT_LOG_TICK_S
    as_of_s: float | None = None


@dataclass(frozen=True, slots=True)
class FrameworkStack:
    """The PyTorch and CUDA versions the user trains with ("2.13", "12.6"): which GPUs a plan may use
    (srift.catalog.support)."""

    torch: str = DEFAULT_TORCH
    cuda: str = DEFAULT_CUDA


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulatorChoice:
    """The simulator settings a plan or prediction request may change (srift.domain.simulation)."""

    exchange: Exchange = Exchange.DDP_BUCKETS
    bucket_cap_mb: float = DDP_BUCKET_CAP_MB

    @property
    def sim_config(self) -> SimConfig:
        """The simulator configuration this request asks for (the served one unless it says otherwise)."""
        return SimConfig(exchange=self.exchange, bucket_cap_mb=self.bucket_cap_mb)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileRequest(SimulatorChoice):
    """What plan and prediction requests share: the simulator settings, which compute profiles they use
    (`selection`; the fields are ProfileSelection's), and whether CPU profiles may stand in for GPUs."""

    profile_ids: tuple[int, ...] | None = None
    profiles: tuple[Mapping[str, Any], ...] | None = None
    model: str | None = None
    precision: Precision | None = None
    allow_cpu_profiles: bool = False
    """Let profiles measured on a CPU stand in for GPU types (srift.domain.devices; the answer says so)."""
    owner: str | None = None
    """Who asks (not a request field: the edge sets it from the token); see ProfileSelection."""

    @property
    def selection(self) -> ProfileSelection:
        return copy_fields(ProfileSelection, self)


@dataclass(frozen=True, slots=True)
class PlanQuery(ProfileRequest):
    """A plan request (POST /v1/plans, `srift plan FILE`): what to optimize, within which limits.

    Placement (docs/geo.md): `providers` and `regions` the fleet may span, the `allreduce` pattern across
    locations and measured `links`; `input_pipeline` and `read_gbps` for data loading; spot interruptions
    priced in with `interruption_rates`, `checkpoint_interval_s`, `restart_s`, `spot_samples`, `fallback`.
    Hardware: only types the framework `stack` can run, and no retired family unless `include_retired`.
    Sharding (srift.domain.sharding): `strategy` (auto: the fastest setup that fits each fleet) and
    `checkpointing` (None: with and without). `recent_market`: the spot figures come from the fitted law
    conditioned on that market's recent past (srift.spot.nowcast) instead of the fitted law alone.
    """

    global_batch: int
    iterations: int
    objective: Objective = Objective.MIN_COST
    time_limit_s: float | None = None
    budget_usd: float | None = None
    provider: str = "aws"
    region: str | None = None
    snapshot: str | None = None
    market: MarketChoice = MarketChoice.ANY
    availability: Mapping[str, int] | None = None
    max_count_per_type: int = 16
    max_gpus: int | None = None
    max_vms: int | None = None
    mode: SearchMode = SearchMode.AUTO
    solve_budget_s: float = 2.0
    batch_policy: BatchPolicy = BatchPolicy.POW2_SPLIT
    eager_k: int = 8
    seed: int = 0
    confidence: float = DEFAULT_CONFIDENCE
    network: NetworkQuery = NetworkQuery()
    regions: tuple[str, ...] | None = None
    providers: tuple[str, ...] | None = None
    allreduce: AllreducePattern = AllreducePattern.RING
    links: tuple[LinkQuery, ...] | None = None
    input_pipeline: InputPipeline | None = None
    read_gbps: float | None = None
    price_interruptions: bool = True
    interruption_rates: Mapping[str, float] | None = None
    checkpoint_interval_s: float = 600.0
    restart_s: float = 150.0
    spot_samples: int = 2000
    fallback: bool = True
    stack: FrameworkStack = FrameworkStack()
    include_retired: bool = False
    strategy: StrategyChoice = StrategyChoice.AUTO
    checkpointing: bool | None = None
    recent_market: RecentMarket | None = None


@dataclass(frozen=True, slots=True)
class FleetChoice:
    """`count` VMs of `instance_type` bought on `market`, each given `batch` samples per iteration."""

    instance_type: str
    count: int
    batch: int
    market: Market = Market.ON_DEMAND
    gpus: int | None = None


@dataclass(frozen=True, slots=True)
class FleetQuery:
    """A fleet to predict: one choice per instance type and market."""

    choices: tuple[FleetChoice, ...]


@dataclass(frozen=True, slots=True)
class PredictionQuery(ProfileRequest):
    """A prediction request (POST /v1/predictions, `srift predict FILE`): one fleet's time and cost
    (`config`), or several fleets' (`configs`, a sweep), under the `network` assumptions.

    `strategy` and `checkpointing` are a plan's (srift.domain.sharding): each fleet is evaluated as a plan
    evaluates a candidate fleet under them. `strategy` None (the default) predicts plain DDP as predictions
    always did, and answers without a strategy section; `checkpointing` then must stay None."""

    iterations: int
    config: FleetQuery | None = None
    configs: tuple[FleetQuery, ...] | None = None
    network: NetworkQuery = NetworkQuery()
    provider: str = "aws"
    region: str | None = None
    snapshot: str | None = None
    comm: CommMode = CommMode.ALLREDUCE
    ps_servers: int = 1
    seed: int = 0
    straggler_iters: int = 100
    mc_samples: int = 0
    input_pipeline: InputPipeline | None = None
    """Overrides the profiles' own, as a plan's does: a plan's fleet predicted gives the plan's data stall."""
    read_gbps: float | None = None
    strategy: StrategyChoice | None = None
    checkpointing: bool | None = None


@dataclass(frozen=True, slots=True)
class ProgressReport:
    """A training run's progress so far (POST /v1/jobs/{id}/progress)."""

    iterations_done: int
    elapsed_s: float
    spent_usd: float


@dataclass(frozen=True, slots=True)
class InterruptionReport:
    """VMs a training run lost (POST /v1/jobs/{id}/interruptions); progress fields update the run's."""

    instance_type: str
    count: int
    iterations_done: int | None = None
    elapsed_s: float | None = None
    spent_usd: float | None = None
    launch_overhead_s: float = 150.0


@dataclass(frozen=True, slots=True)
class Amendment:
    """New limits or objective for the rest of a training run (POST /v1/jobs/{id}/amendments); None keeps
    the run's current value. The run is re-planned under them, which resumes one in `needs_input`."""

    time_limit_s: float | None = None
    budget_usd: float | None = None
    objective: Objective | None = None
    launch_overhead_s: float = 150.0


@dataclass(frozen=True, slots=True)
class IterationReport:
    """Measured iteration times of a training run (POST /v1/jobs/{id}/iterations): (step, seconds) pairs
    against `plan_id` (None: the run's current plan), the seconds since the run started, and whether the
    run has finished reporting (`final`: its steps become an observation of the plan's prediction)."""

    steps: tuple[tuple[int, float], ...]
    plan_id: int | None = None
    elapsed_s: float | None = None
    final: bool = False
