"""Request and response schemas for plans (POST/GET /v1/plans) and tracked training jobs (/v1/jobs)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from srift.api.schemas.network import NetworkIn, NetworkOut
from srift.api.schemas.profiles import ProfileIn
from srift.api.schemas.types import (
    NO_NUL,
    BucketCapMb,
    ExchangeField,
    KeysStated,
    ProviderField,
    RegionField,
    SnapshotField,
    Timestamp,
    TypeName,
    check_one_of,
    one_of,
    parse_request,
)
from srift.documents import WHOLE, StrictModel, field_defaults, publish_rules, read_document, rule_error
from srift.domain import MarketChoice, Objective, SearchMode
from srift.domain.geo import AllreducePattern
from srift.domain.planning import MAX_CONFIDENCE, MIN_CONFIDENCE
from srift.domain.requests import (
    DEFAULT_CUDA,
    DEFAULT_TORCH,
    Amendment,
    InterruptionReport,
    PlanQuery,
    ProfileRequest,
    ProgressReport,
    RecentMarket,
)
from srift.domain.sharding import StrategyChoice
from srift.domain.states import TrainingState
from srift.domain.structure import Precision
from srift.limits import (
    DEFAULT_MAX_SOLVE_BUDGET_S,
    MAX_COUNT,
    MAX_GLOBAL_BATCH,
    MAX_INSTANCE_TYPES_PER_REQUEST,
    MAX_NAME_CHARS,
    MAX_PROFILES_PER_REQUEST,
    MAX_SOLVE_BUDGET_S,
)
from srift.optimize.space import BatchPolicy

PROFILE_SELECTION = ("profile_ids", "profiles", "model")
ONE_MODEL_RULE = ("profiles-of-one-model", "inline profiles all have the same model")
ProfileId = Annotated[int, Field(ge=1, le=2**31 - 1)]
SELECTION_TYPES = {"profile_ids": "array", "profiles": "array", "model": "string"}
CountCap = Annotated[int, Field(ge=0, le=MAX_COUNT)]
MonthlyShare = Annotated[float, Field(ge=0, lt=1)]
"""A share of VMs interrupted per month: 0 (none) up to, not including, 1 (every VM every month)."""
MAX_LOCATIONS_PER_REQUEST = 32
LOCATION_NAME = r"^[a-z0-9-]+(/[a-z0-9-]+){0,2}$"
LocationName = Annotated[str, Field(min_length=1, max_length=130, pattern=LOCATION_NAME)]
RegionName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=130,
        pattern=LOCATION_NAME,
        json_schema_extra={"pattern": r"^[a-z0-9-]+(/[a-z0-9-]+)?$"},
    ),
]
"""A region or provider/region, never a zone: the schema states it; the server refuses a zone in its own
words (srift.services.placement: plans place VMs by region)."""
ProviderName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$")]


class LinkIn(StrictModel):
    """A measured link between two locations (overrides the shipped prior for that direction)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: LocationName = Field(alias="from", description="provider/region[/zone] sending")
    to: LocationName = Field(description="provider/region[/zone] receiving")
    bandwidth_gbps: float = Field(gt=0, le=10_000, description="one TCP stream's Gbit/s")
    rtt_ms: float = Field(ge=0, le=10_000, description="measured round trip (ping) in ms")


class InputPipelineIn(StrictModel):
    """What feeding one sample costs (overrides the profiles' own `input_pipeline`)."""

    model_config = ConfigDict(extra="forbid")

    samples_per_s_per_core: float = Field(gt=0, le=1e9, description="samples/s one CPU core delivers")
    bytes_per_sample: float = Field(default=0.0, ge=0, le=1e12, description="bytes read per sample")


Version = Annotated[
    str,
    Field(
        min_length=3,
        max_length=16,
        pattern=r"^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})(\.(0|[1-9][0-9]{0,3}))?$",
    ),
]


class StackIn(StrictModel):
    """The framework stack the model trains with: only GPUs its CUDA and PyTorch builds run are planned."""

    model_config = ConfigDict(extra="forbid")

    torch: Version = Field(default=DEFAULT_TORCH, description="PyTorch version, e.g. 2.13")
    cuda: Version = Field(
        default=DEFAULT_CUDA,
        description="CUDA version of the PyTorch build, e.g. 12.6 (cu126: compute capability 5.0 to 9.0)",
    )


_RECENT = field_defaults(RecentMarket)
RECENT_SOURCES = ("trace", "log_csv")
RECENT_MARKET_RULE = (
    "recent-market-needs-spot-pricing-and-fallback",
    "recent_market needs a market that allows spot (spot or any), price_interruptions: true and "
    "fallback: true (Srift's deadline policy, which the nowcast's figures are for, falls back to the "
    "on-demand plan)",
)
RECENT_MARKET_SERVER_RULES = (
    "the named trace is one the server's trace set holds (`srift traces import`, `srift traces list`), else "
    "404 naming recent_market.trace; the trace or log covers the plan's spot fleet (its instance type, in "
    "its provider/region, with at least its VM count), else 422 naming recent_market.trace or "
    "recent_market.log_csv; as_of_s lies within the log (at least one tick, at most its length), else 422 "
    "naming recent_market.as_of_s"
)


class RecentMarketIn(StrictModel):
    """The recent spot market to condition the plan's spot figures on (srift.spot.nowcast: the fitted
    law's mean up time and mean gap updated by the look-back before `as_of_s`, the run starting in the state
    seen then). Give exactly one of `trace` (an imported trace by name) or `log_csv` (the log inline). The
    server checks, once the plan's spot fleet is known, that the named trace is in its trace set (else a
    404 naming `recent_market.trace`), that the trace or log covers the fleet (its type, in its
    provider/region, with at least its VMs) and that `as_of_s` lies within the log (else a 422 naming the
    field; rule recent-market-covers-the-fleet)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=publish_rules(
            ("one-recent-source", "exactly one of trace and log_csv"),
            (
                "recent-market-covers-the-fleet",
                RECENT_MARKET_SERVER_RULES,
            ),
            then=one_of(*RECENT_SOURCES, types={"trace": "string", "log_csv": "string"}),
        ),
    )

    trace: str | None = Field(
        default=None,
        min_length=1,
        max_length=1000,
        pattern=NO_NUL,
        description="an imported trace's name as `srift traces list` shows it (e.g. "
        "user:log.csv#aws/us-east-1a/p3.2xlarge); it must cover the plan's spot type, region and VM count",
    )
    log_csv: str | None = Field(
        default=None,
        min_length=1,
        max_length=4_000_000,
        pattern=NO_NUL,
        description="a launch/interruption log inline, the CSV `srift traces import` reads: a header "
        "time,zone,instance_type,event,count (provider optional; default the request's), then one row per "
        "event (ISO 8601 time, launched or interrupted, VMs); its rows for the plan's spot type and region "
        "are used; errors name the row (recent_market.log_csv.rows[i].count)",
    )
    tick_s: float = Field(
        default=_RECENT["tick_s"],
        ge=1,
        le=86_400,
        description="with log_csv: seconds between the ticks the log is sampled at",
    )
    as_of_s: float | None = Field(
        default=None,
        gt=0,
        le=1e9,
        description="when the run starts, in seconds after the log's first tick: only the log before it "
        "is used; at least one tick and at most the log's length (default: the log's end)",
    )

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        check_one_of(self, *RECENT_SOURCES)
        return self


_SHARED = field_defaults(ProfileRequest)
"""ProfileRequest owns the shared fields' defaults; the schema states them (test_request_defaults)."""


class ProfileRequestIn(StrictModel):
    """What plan and prediction requests share (srift.domain.requests.ProfileRequest): the compute profiles,
    as stored `profile_ids`, inline `profiles` or a `model`, exactly one (ProfileSelection), in a
    `precision`, whether CPU profiles may stand in for GPUs, and the simulator's `exchange` settings."""

    profile_ids: list[ProfileId] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PROFILES_PER_REQUEST,
        description="stored profile ids (GET /v1/profiles)",
    )
    profiles: list[ProfileIn] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PROFILES_PER_REQUEST,
        description="inline profile documents as written by `srift profile`, all of one model",
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME_CHARS,
        pattern=NO_NUL,
        description="use every stored profile of this model",
    )
    allow_cpu_profiles: bool = Field(
        default=_SHARED["allow_cpu_profiles"],
        description="use profiles that `srift profile` measured on a CPU for GPU instance types (a stand-in: "
        "the answer says so); refused otherwise",
    )
    precision: Precision | None = Field(
        default=None,
        description=(
            "arithmetic the model trains in: fp32, tf32, fp16 or bf16 (autocast); the profiles used are "
            "those in it (default: the profiles' own; for a model stored in several, fp32)"
        ),
    )
    exchange: ExchangeField = _SHARED["exchange"]
    bucket_cap_mb: BucketCapMb = _SHARED["bucket_cap_mb"]

    @model_validator(mode="after")
    def _one_selection(self) -> Self:
        check_one_of(self, *PROFILE_SELECTION)
        return self


_PLAN = field_defaults(PlanQuery)
"""PlanQuery owns the plan request's defaults; the schema states them (tests/api/test_request_defaults)."""

STRATEGY_DESCRIPTION = (
    "data-parallel strategy: ddp, zero1 (optimizer state sharded), zero2 (FSDP SHARD_GRAD_OP), full_shard "
    "(FSDP2 fully_shard, ZeRO-3), hybrid (sharded within a node, replicated across nodes), or auto: per "
    "fleet the fastest that fits its GPUs' memory (sharded strategies only for models whose memory is known)"
)
CHECKPOINTING_DESCRIPTION = "activation checkpointing of every block: true, false, or null to consider both"
"""The `strategy` and `checkpointing` fields' words, shared by the plan and prediction requests."""


class RunRequestIn(ProfileRequestIn):
    """What plan and prediction requests share beyond the profiles (ProfileRequestIn): the `iterations` to
    train, where the fleet is priced (`provider`, `region`, the catalog `snapshot`), how its nodes talk
    (`network`) and what feeding its GPUs costs (`input_pipeline`, `read_gbps`). PlanQuery and
    PredictionQuery each own the same defaults (tests/api/test_request_defaults checks the schema against
    both)."""

    iterations: int = Field(ge=1, le=1_000_000_000, description="iterations to train (N)")
    provider: ProviderField = _PLAN["provider"]
    region: RegionField = None
    snapshot: SnapshotField = None
    network: NetworkIn = Field(
        default_factory=NetworkIn, description="transport between nodes and measured rates (see NetworkIn)"
    )
    input_pipeline: InputPipelineIn | None = Field(
        default=None, description="the input pipeline's cost, overriding the profiles' own"
    )
    read_gbps: float | None = Field(
        default=None, gt=0, le=10_000, description="input read rate per VM (default: its network rate)"
    )


class PlanRequest(RunRequestIn):
    """What to optimize. Give the model's compute profiles as `profile_ids`, inline `profiles`, or `model`
    (all stored profiles of that model); limits are optional, objective decides what is minimised."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=publish_rules(
            ONE_MODEL_RULE, RECENT_MARKET_RULE, then=one_of(*PROFILE_SELECTION, types=SELECTION_TYPES)
        ),
    )

    global_batch: int = Field(
        ge=1, le=MAX_GLOBAL_BATCH, description="samples per iteration over the whole fleet"
    )
    objective: Objective = Field(default=_PLAN["objective"], description="min_cost or min_time")
    time_limit_s: float | None = Field(
        default=None, gt=0, le=1e9, description="N·t_iter must not exceed this"
    )
    budget_usd: float | None = Field(
        default=None, gt=0, le=1e9, description="total cost must not exceed this"
    )
    market: MarketChoice = Field(
        default=_PLAN["market"], description="spot, on_demand or any (cheaper per type)"
    )
    availability: Annotated[dict[TypeName, CountCap], KeysStated] | None = Field(
        default=None,
        max_length=MAX_INSTANCE_TYPES_PER_REQUEST,
        description="instance type → max count; only these types are used",
    )
    max_count_per_type: int = Field(
        default=_PLAN["max_count_per_type"],
        ge=1,
        le=MAX_COUNT,
        description="count cap for types when availability is not given",
    )
    max_gpus: int | None = Field(
        default=None, ge=1, le=MAX_COUNT * 16, description="at most this many GPUs in the fleet (all types)"
    )
    max_vms: int | None = Field(
        default=None, ge=1, le=MAX_COUNT, description="at most this many VMs in the fleet (all types)"
    )
    mode: SearchMode = Field(default=_PLAN["mode"], description="exhaustive, eager or auto")
    solve_budget_s: float = Field(
        default=_PLAN["solve_budget_s"],
        gt=0,
        description="seconds the search may take, at most the server's SRIFT_MAX_SOLVE_BUDGET_S (default "
        f"{DEFAULT_MAX_SOLVE_BUDGET_S:g} s, never above {MAX_SOLVE_BUDGET_S:g} s; the maximum stated here is "
        "this server's)",
        json_schema_extra={"maximum": MAX_SOLVE_BUDGET_S},
    )
    batch_policy: BatchPolicy = Field(
        default=_PLAN["batch_policy"], description="per-VM batches: pow2_split, pow2 or any"
    )
    eager_k: int = Field(
        default=_PLAN["eager_k"],
        ge=1,
        le=MAX_COUNT,
        description="eager: VMs of one type tried before the next",
    )
    seed: int = Field(
        default=_PLAN["seed"], ge=0, le=2**31 - 1, description="seed of the simulator's straggler sampling"
    )
    confidence: float = Field(
        default=_PLAN["confidence"],
        ge=MIN_CONFIDENCE,
        le=MAX_CONFIDENCE,
        description="the quantile of predicted time and cost that must meet time_limit_s and budget_usd "
        "(0.5: the prediction itself; 0.9: nine runs in ten, by the prediction's measured spreads)",
    )
    network: NetworkIn = Field(  # RunRequestIn's, with what it means for a plan
        default_factory=NetworkIn,
        description="transport between nodes and measured rates; with transport efa only EFA types are used",
    )
    regions: list[RegionName] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LOCATIONS_PER_REQUEST,
        description=(
            "several regions the fleet may span: region names (of every allowed provider that has them) "
            "or provider/region; at least one, or leave it out for the default: `region` alone, or every "
            "catalog region of `providers`"
        ),
    )
    providers: list[ProviderName] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LOCATIONS_PER_REQUEST,
        description="several providers (clouds) the fleet may span; at least one, or leave it out for the "
        "default: `provider` alone",
    )
    allreduce: AllreducePattern = Field(
        default=_PLAN["allreduce"],
        description="how gradients cross locations: ring (PyTorch DDP) or hierarchical (Hivemind-style)",
    )
    links: list[LinkIn] | None = Field(
        default=None, max_length=256, description="measured links between locations (override the prior)"
    )
    price_interruptions: bool = Field(
        default=_PLAN["price_interruptions"],
        description="price spot interruptions in (expected time and cost), Srift §4.5",
    )
    interruption_rates: Annotated[dict[TypeName, MonthlyShare], KeysStated] | None = Field(
        default=None,
        max_length=MAX_INSTANCE_TYPES_PER_REQUEST,
        description="type or provider/region/type → share of VMs interrupted per month, at least 0 and "
        "below 1 (1 would be every VM, every month), overrides",
    )
    checkpoint_interval_s: float = Field(
        default=_PLAN["checkpoint_interval_s"],
        ge=0,
        le=1e7,
        description="seconds of progress between checkpoints (0: every iteration)",
    )
    restart_s: float = Field(
        default=_PLAN["restart_s"],
        ge=0,
        le=1e6,
        description="seconds from an interruption until training runs again",
    )
    spot_samples: int = Field(
        default=_PLAN["spot_samples"],
        ge=1,
        le=100_000,
        description="Monte Carlo runs for a spot plan's expectations",
    )
    fallback: bool = Field(
        default=_PLAN["fallback"], description="also plan an on-demand fallback for spot plans"
    )
    stack: StackIn = Field(
        default_factory=StackIn,
        description=(
            "the PyTorch and CUDA versions you train with: types whose GPUs they cannot run (compute "
            f"capability) are left out, with a warning (default torch {DEFAULT_TORCH}, cuda {DEFAULT_CUDA})"
        ),
    )
    include_retired: bool = Field(
        default=_PLAN["include_retired"],
        description="also plan with instance families the provider has retired",
    )
    strategy: StrategyChoice = Field(default=_PLAN["strategy"], description=STRATEGY_DESCRIPTION)
    checkpointing: bool | None = Field(default=_PLAN["checkpointing"], description=CHECKPOINTING_DESCRIPTION)

    recent_market: RecentMarketIn | None = Field(
        default=None,
        description="condition the spot figures (expected time and cost, their quantiles, P(meets the "
        'time limit)) on this recent market (srift.spot.nowcast, as validated in docs/BENCHMARKS.md "spot '
        "on real traces\"); the plan's spot.spot_model says which model produced them. Needs market spot "
        "or any, price_interruptions and fallback (see RecentMarketIn for what the server checks)",
    )

    @model_validator(mode="after")
    def _recent_market_rule(self) -> Self:
        if self.recent_market is None:
            return self
        for name, bad, value in (
            ("market", self.market is MarketChoice.ON_DEMAND, "on_demand"),
            ("price_interruptions", not self.price_interruptions, "false"),
            ("fallback", not self.fallback, "false"),
        ):
            if bad:
                raise rule_error(
                    f"recent_market conditions the spot figures, but {name} is {value}",
                    field="recent_market",
                    hint=RECENT_MARKET_RULE[1] + f"; change {name} or drop recent_market",
                )
        return self

    def to_domain(self, *, owner: str | None = None) -> PlanQuery:
        """The validated request as the services' PlanQuery, asked by `owner` (the token's name)."""
        return read_document(PlanQuery, {**self.model_dump(), "owner": owner})


def parse_plan_request(data: Any) -> PlanRequest:
    """Validate a plan request document (CLI files), raising InvalidInput that names the field."""
    return parse_request(PlanRequest, data)


class ChoiceOut(BaseModel):
    instance_type: str
    market: str
    count: int
    batch: int = Field(description="samples per VM per iteration")
    gpus: int = Field(description="GPUs used per VM")
    per_gpu_batch: float
    price_usd_per_hr: float
    instance_gpus: int | None = Field(default=None, description="GPUs the instance type has")
    location: str | None = Field(default=None, description="provider/region when the plan spans locations")
    compute: str | None = Field(
        default=None,
        description="measured (a profile made on this accelerator) or estimate:roofline / estimate:scaled",
    )
    compute_spread: float | None = Field(
        default=None, description="relative 1-σ error of an estimated compute time (null when measured)"
    )
    memory_per_gpu_bytes: int | None = Field(
        default=None,
        description="peak bytes per GPU at this batch by the training memory model of the choice's "
        "strategy (parameters, gradients, optimizer state, DDP buckets or gathered units, activations, CUDA "
        "context and NCCL); null for a CPU type or a profile without a memory model",
    )
    gpu_memory_bytes: int | None = Field(default=None, description="bytes of one GPU of the type")
    batch_limit: str | None = Field(
        default=None, description="why this type's per-GPU batch is capped, when memory caps it"
    )
    strategy: str | None = Field(default=None, description="the data-parallel strategy this choice runs")
    checkpointing: bool | None = Field(default=None, description="activation checkpointing of every block")
    wrap: str | None = Field(default=None, description="FSDP unit wrapping policy (sharded strategies)")
    precision: str | None = Field(default=None, description="fp32, or mixed (bf16 compute, fp32 master)")


class StrategyMemoryOut(BaseModel):
    instance_type: str
    capacity_gib: float = Field(description="the GPU's memory (a CPU type's RAM per rank)")
    peak_bytes: int | None = Field(description="predicted peak per GPU at its batch")
    parts: dict[str, int] | None = Field(
        default=None,
        description="bytes per part: parameters, gradients, optimizer_state, ddp_buckets, "
        "gathered_parameters, comm_buffers, activations, reserve",
    )
    shard_ranks: int | None = None
    batch: float | None = None
    source: str | None = None


class SetupComparedOut(BaseModel):
    setup: str = Field(description="strategy, +ckpt with checkpointing")
    strategy: str
    checkpointing: bool
    fits: bool
    iteration_s: float | None = Field(description="predicted iteration time when it fits")
    reason: str | None = Field(description="why it does not fit")
    peak_gib: float | None = Field(default=None, description="largest predicted peak per GPU")


class StrategyOut(BaseModel):
    """How to run the plan and why: the setup, its memory per GPU, the setups it was compared with."""

    strategy: str | None
    checkpointing: bool | None = None
    wrap: str | None = None
    precision: str | None = None
    how: str | None = Field(default=None, description="what to write in PyTorch")
    why: str | None = Field(default=None, description="why this setup, in words (`why_kind` says which case)")
    why_kind: Literal["only_allowed", "only_checkable", "fastest_fits", "none_fits"] | None = Field(
        default=None,
        description="which case `why` words: only_allowed, the request allowed this setup alone (e.g. "
        "strategy ddp "
        "without checkpointing, or a prediction's mc_samples above 0 or comm parameter_server, which "
        "leave plain DDP alone); only_checkable, `auto` planned DDP alone because no profile carries "
        "the model's sharding facts and DDP holds the model on every candidate GPU; fastest_fits, the "
        "fastest of the setups compared that fits the fleet; none_fits, no setup fits. Null in plans "
        "made before it was recorded",
    )
    memory: list[StrategyMemoryOut] = Field(default_factory=list)
    compared: list[SetupComparedOut] = Field(default_factory=list)


class EstimatedCandidateOut(BaseModel):
    method: str = Field(description="estimate:roofline or estimate:scaled")
    accelerator: str = Field(description="the accelerator spec the estimate is for")
    based_on: str | None = Field(description="the accelerator a scaled estimate was measured on")
    spread: float = Field(description="relative 1-σ error, measured leaving one accelerator out")
    unaligned_share: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="share of the step's FLOP-counted work at the largest batch in fp16/bf16 matrix products "
        "with a dimension that is not a multiple of 16 bytes (cuBLAS's tensor-core alignment), which a "
        "roofline estimate prices like aligned ones and one scaled from a GPU profile at that GPU's cost "
        "(docs/gpu.md); null outside autocast or in plans made before",
    )


class EstimatedOut(BaseModel):
    """Which numbers rest on estimated compute rather than a profile measured on the accelerator."""

    in_plan: list[str] = Field(description="chosen instance types whose compute is estimated")
    candidates: dict[str, EstimatedCandidateOut] = Field(
        description="every candidate type whose compute is estimated"
    )


class SpreadTermOut(BaseModel):
    source: str = Field(description="compute, network, stragglers or a modelled term")
    spread: float = Field(description="the source's own measured spread (standard deviation of its log)")
    sigma: float = Field(description="what it adds to the log-spread of the mean iteration time")
    measured_by: str


class BandOut(BaseModel):
    sigma: float = Field(description="log-spread of the mean iteration time: √Σ term sigma²")
    terms: list[SpreadTermOut] = Field(default_factory=list)


AnswerPrecision = Annotated[str | None, Field(description="the arithmetic the profiles are in")]
"""The `precision` of a plan and of a prediction: the profiles' arithmetic the answer rests on."""

WithinBudgetShare = Annotated[
    float | None, Field(description="share of the runs that cost at most budget_usd; null without a budget")
]
"""`p_within_budget` of a spot plan (SpotOut) and of the figures a nowcast compares (SpotFiguresOut)."""


class PredictedOut(BaseModel):
    iteration_s: float
    iteration_p10_s: float = Field(description="p10 of the run's mean iteration time (the band)")
    iteration_p50_s: float
    iteration_p90_s: float = Field(description="p90 of the run's mean iteration time (the band)")
    total_time_s: float = Field(
        description="expected over spot interruptions when they are priced in, the fleet restarting in "
        "place after each (what the search compares spot fleets by; a plan's `spot` section gives the run "
        "re-planned after an interruption)"
    )
    total_time_p10_s: float | None = None
    total_time_p90_s: float | None = None
    cost_usd: float = Field(
        description="VMs plus egress; expected over spot interruptions when priced in (restarting in "
        "place, as total_time_s)"
    )
    cost_p10_usd: float | None = None
    cost_p90_usd: float | None = None
    band: BandOut | None = Field(default=None, description="the measured spreads the band rests on")
    egress_usd: float = Field(
        default=0.0, description="gradient bytes leaving each location, priced per route"
    )
    uninterrupted_time_s: float | None = Field(default=None, description="the run if nothing is interrupted")
    uninterrupted_cost_usd: float | None = Field(default=None, description="its cost")


class ProbabilityOut(BaseModel):
    meets_time_limit: float | None = Field(description="P(total time ≤ time_limit_s); null without a limit")
    within_budget: float | None = Field(description="P(cost ≤ budget_usd); null without a budget")
    total_time_s_at_confidence: float = Field(description="the total time's quantile at the confidence")
    cost_usd_at_confidence: float = Field(description="the cost's quantile at the confidence")


class BreakdownOut(BaseModel):
    forward_s: float
    backward_s: float
    compute_s: float
    straggler_wait_s: float
    exposed_intra_s: float
    exposed_network_s: float
    communication_s: float
    granularity: float | None = Field(
        description="compute / communication; null when there is no communication"
    )
    data_stall_s: float = Field(default=0.0, description="time the slowest VM's input pipeline adds")
    exposed_location_s: float = Field(
        default=0.0, description="part of exposed_network_s on inter-location links"
    )
    warnings: list[str] = Field(default_factory=list)


class LimitsOut(BaseModel):
    time_limit_s: float | None
    budget_usd: float | None


class HeadroomOut(BaseModel):
    time_s: float | None = Field(description="time_limit_s − predicted total time")
    budget_usd: float | None = Field(description="budget_usd − predicted cost")


class BaselineOut(BaseModel):
    policy: str
    label: str
    choices: list[ChoiceOut]
    predicted: PredictedOut
    breakdown: BreakdownOut
    feasible: bool
    probability: ProbabilityOut | None = None


class BaselinesOut(BaseModel):
    cap: BaselineOut | None
    tap: BaselineOut | None


class ParetoPointOut(BaseModel):
    label: str
    total_time_s: float
    cost_usd: float
    feasible: bool
    on_front: bool
    chosen: bool


class LocationOut(BaseModel):
    location: str = Field(description="provider/region")
    provider: str
    region: str
    continent: str | None
    place: str
    vms: int
    gpus: int
    usd_per_hr: float = Field(description="what this location's VMs cost per hour")


class EgressOut(BaseModel):
    source: str = Field(description="provider/region sending")
    destination: str
    route: str = Field(
        description="intra_zone, inter_zone, inter_region, inter_continent, to_oceania, internet"
    )
    gb_per_iteration: float
    usd_per_gb: float
    usd: float = Field(description="over the whole run (uninterrupted)")


class CostOut(BaseModel):
    instances_usd: float
    egress_usd: float
    total_usd: float
    egress_share: float = Field(description="egress / total, 0..1")


class SpotRateOut(BaseModel):
    instance_type: str
    location: str | None
    monthly_fraction: float = Field(description="share of VMs interrupted per month")
    per_hr: float = Field(description="interruptions per VM-hour")
    band: str = Field(description='the published band, "given" (the request) or "traces" (fitted to traces)')
    source: str
    widened_monthly: list[float] | None = Field(
        None,
        description="no trace covers the offer: its fallback band widened one band each side (monthly "
        "shares, low and high)",
    )


class SpotFiguresOut(BaseModel):
    """A spot prediction's figures (Srift's deadline policy on drawn timelines, or the Monte Carlo's)."""

    expected_time_s: float | None = None
    expected_cost_usd: float | None = None
    time_p10_s: float | None = None
    time_p50_s: float | None = None
    time_p90_s: float | None = None
    cost_p90_usd: float | None = None
    p_meets_time_limit: float | None = None
    expected_interruptions: float | None = None
    samples: int | None = None
    method: str | None = None
    p_interrupted: float | None = Field(None, description="share of the runs interrupted at least once")
    p_within_budget: WithinBudgetShare = None
    closed_form_time_s: float | None = Field(
        None, description="the fitted law's restart-in-place expectation (null for the nowcast: it has none)"
    )


class SpotNowcastOut(BaseModel):
    """What conditioned a plan's spot figures (the request's recent_market) and what they replaced."""

    trace: str = Field(description="the recent log's trace name")
    source: str = Field(description="the request field it came from: recent_market.trace or .log_csv")
    as_of_s: float = Field(description="the run starts this many seconds after the log's first tick")
    lookback_s: float = Field(description="the look-back the nowcast conditions on (chosen on the traces)")
    up_s: float = Field(description="seconds the fleet's capacity was up within the look-back")
    down_s: float = Field(description="seconds it was not")
    interruptions: int = Field(description="up runs that ended within the look-back")
    capacity_returns: int = Field(description="capacity gaps that ended within the look-back")
    up_at_start: bool = Field(description="whether capacity was there just before the start")
    constants: str = Field(description="the nowcast's constants and how they were chosen")
    law: str = Field(description="the prior law's source: fitted, sparse or extrapolated")
    traces: list[str] = Field(description="the traces the law and the constants were fitted to")
    spot_share: float = Field(description="expected share of the run's time on spot (the rest on-demand)")
    without_recent: SpotFiguresOut = Field(
        description="the same policy and law without the look-back (the fitted law alone, started in its "
        "stationary state): what the recent market changed"
    )
    fitted_law: SpotFiguresOut = Field(
        description="the fitted law's Monte Carlo figures the nowcast replaced (its closed_form_time_s too)"
    )
    closed_form: str | None = Field(
        None,
        description="why the section's closed_form_time_s is null: the closed form is the fitted law's alone "
        "(null in plans stored before it was said)",
    )


class SpotOut(BaseModel):
    """A spot plan's expectations over interruptions (Monte Carlo with Srift §4.5 re-planning)."""

    method: str
    samples: int
    expected_time_s: float
    expected_cost_usd: float
    uninterrupted_time_s: float
    uninterrupted_cost_usd: float
    time_p10_s: float
    time_p50_s: float
    time_p90_s: float
    cost_p90_usd: float
    expected_interruptions: float
    p_interrupted: float = Field(description="share of the runs interrupted at least once")
    p_meets_time_limit: float | None
    p_within_budget: WithinBudgetShare
    closed_form_time_s: float | None = Field(
        description="restart-in-place expectation the search compared fleets on (the fitted law's); null "
        "when spot_model is a nowcast, which has no closed form: then it is under nowcast.fitted_law"
    )
    checkpoint_interval_s: float
    restart_s: float
    rates: list[SpotRateOut]
    spot_model: str = Field(
        default="fitted law",
        description='which model produced the figures above: "fitted law" (the Monte Carlo of the law '
        'fitted to traces, or the published band) or "nowcast(look-back H h, K ended runs)" (the request\'s '
        "recent_market: the fitted law conditioned on the market's recent past, Srift's deadline policy; "
        "every figure above is then the nowcast's timelines', P(interrupted) and P(within budget) included)",
    )
    nowcast: SpotNowcastOut | None = Field(
        default=None, description="with recent_market: what the nowcast saw and the figures it replaced"
    )


class FallbackOut(BaseModel):
    """The on-demand fleet a spot plan falls back to when re-planning finds nothing else."""

    label: str
    choices: list[ChoiceOut]
    predicted: PredictedOut


class FeedOut(BaseModel):
    instance_type: str
    location: str | None
    loader_cores: int
    samples_per_s: float = Field(description="what its input pipeline feeds per second")
    bound: str = Field(description="decode (vCPUs) or read (storage/network)")
    gpu_samples_per_s: float = Field(description="what its GPUs train per second at their largest batch")
    stalls_above_batch: int | None = Field(description="per-VM batches above this stall; null: never")


class DiminishingReturnsOut(BaseModel):
    """A much cheaper or smaller fleet nearly as fast as a min_time plan (srift.optimize.returns)."""

    alternative: str = Field(description="the fleet, e.g. 16×g4dn.12xlarge@16")
    total_time_s: float
    cost_usd: float
    gpus: int
    plan_gpus: int
    seconds_saved: float = Field(description="how much sooner the plan finishes")
    extra_usd: float = Field(description="what the plan costs more")
    extra_gpus: int = Field(description="how many more GPUs the plan uses (negative: fewer)")
    seconds_per_usd: float | None = Field(description="seconds saved per extra dollar")
    seconds_per_gpu: float | None = Field(description="seconds saved per extra GPU")


class PlanResult(BaseModel):
    """The optimizer's answer as stored and returned."""

    label: str
    objective: Objective
    mode: SearchMode = Field(
        description="the search that produced the plan (auto resolves to one of the two)"
    )
    proven_optimal: bool
    choices: list[ChoiceOut]
    counts: list[int]
    batches: list[int]
    global_batch: int
    iterations: int
    predicted: PredictedOut
    confidence: float | None = Field(
        default=None, description="the quantile of time and cost the limits were checked against"
    )
    probability: ProbabilityOut | None = None
    limits: LimitsOut
    headroom: HeadroomOut
    breakdown: BreakdownOut
    baselines: BaselinesOut
    pareto: list[ParetoPointOut]
    pareto_total: int
    solve_time_s: float
    configs_evaluated: int
    network: NetworkOut | None = Field(
        default=None, description="what was assumed between nodes (null in plans stored before it existed)"
    )
    sources: list[str]
    warnings: list[str]
    locations: list[LocationOut] = Field(default_factory=list, description="VMs per location")
    cost: CostOut | None = Field(default=None, description="the cost line: instances and egress")
    egress: list[EgressOut] = Field(default_factory=list)
    spot: SpotOut | None = Field(default=None, description="expected vs uninterrupted time and cost")
    fallback: FallbackOut | None = None
    data_loading: list[FeedOut] = Field(default_factory=list)
    optimality_gap: float | None = Field(
        default=None,
        description="0 when proven optimal; else, when known, how far (a fraction of the plan's objective) "
        "the optimum could be below the plan",
    )
    diminishing_returns: DiminishingReturnsOut | None = Field(
        default=None, description="a much cheaper or smaller fleet nearly as fast (min_time plans)"
    )
    precision: AnswerPrecision = None
    estimated: EstimatedOut | None = Field(
        default=None, description="which numbers rest on estimated compute (absent in plans made before)"
    )
    calibration: dict[str, Any] | None = Field(
        default=None,
        description="srift.services.calibration: `model` and `network_key` runs of this plan are filed "
        "under, `raw` (the uncorrected iteration_s, compute_s, comm_s and band sigma runs are compared "
        "with), `runs` (measured runs the applied correction rests on; 0: uncorrected) and `text` "
        '("calibrated on 3 runs: compute ×1.1, communication ×0.9")',
    )
    strategy: StrategyOut | None = Field(
        default=None, description="how to run the plan (absent in plans made before strategies existed)"
    )


class PlanOut(PlanResult):
    id: int
    created_at: Timestamp
    request: dict[str, Any]


class JobCreate(StrictModel):
    model_config = ConfigDict(extra="forbid")

    plan_id: Annotated[int, Field(ge=1, le=2**31 - 1), WHOLE] = Field(description="the plan being run")


class ProgressIn(StrictModel):
    model_config = ConfigDict(extra="forbid")

    iterations_done: int = Field(ge=0, le=1_000_000_000)
    elapsed_s: float = Field(ge=0, le=1e9, description="seconds since the job started, launch included")
    spent_usd: float = Field(ge=0, le=1e9, description="money spent so far")

    def to_domain(self) -> ProgressReport:
        return read_document(ProgressReport, self.model_dump())


class InterruptionIn(StrictModel):
    model_config = ConfigDict(extra="forbid")

    instance_type: str = Field(min_length=1, max_length=128)
    count: int = Field(ge=1, le=MAX_COUNT, description="VMs of that type lost")
    iterations_done: int | None = Field(default=None, ge=0, le=1_000_000_000)
    elapsed_s: float | None = Field(default=None, ge=0, le=1e9)
    spent_usd: float | None = Field(default=None, ge=0, le=1e9)
    launch_overhead_s: float = Field(default=150.0, ge=0, le=1e6, description="time to boot replacement VMs")

    def to_domain(self) -> InterruptionReport:
        return read_document(InterruptionReport, self.model_dump())


_AMENDED = (("time_limit_s", "number"), ("budget_usd", "number"), ("objective", "string"))


class AmendmentIn(StrictModel):
    """New limits or objective for the rest of a run; omitted fields keep the run's current values. At least
    one of time_limit_s, budget_usd and objective is given (not null)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [{"required": [name], "properties": {name: {"type": kind}}} for name, kind in _AMENDED]
        },
    )

    time_limit_s: float | None = Field(
        default=None, gt=0, le=1e9, description="the run's whole deadline, counted from its start"
    )
    budget_usd: float | None = Field(
        default=None, gt=0, le=1e9, description="the run's whole budget, money spent so far included"
    )
    objective: Objective | None = Field(default=None, description="min_cost or min_time for the rest")
    launch_overhead_s: float = Field(default=150.0, ge=0, le=1e6, description="time to boot new VMs")

    def to_domain(self) -> Amendment:
        return read_document(Amendment, self.model_dump())


class JobEventOut(BaseModel):
    id: int
    kind: str
    created_at: Timestamp
    payload: dict[str, Any]


class JobPlanOut(BaseModel):
    id: int
    label: str
    iterations: int
    total_time_s: float
    cost_usd: float


class TrainingJobOut(BaseModel):
    id: int
    plan_id: int
    current_plan_id: int
    state: TrainingState = Field(description="needs_input: a re-plan could not meet the limits")
    created_at: Timestamp
    iterations_total: int
    iterations_done: int
    elapsed_s: float
    spent_usd: float
    time_limit_s: float | None
    budget_usd: float | None
    objective: Objective = Field(description="the objective the rest of the run is planned for")
    excluded_types: list[str]
    plans: list[JobPlanOut]
    events: list[JobEventOut]


class InterruptionOut(BaseModel):
    job: TrainingJobOut
    plan: PlanOut


class ErrorOut(BaseModel):
    error: str
    detail: str
    hint: str
    field: str | None
    relaxations: dict[str, float | None] | None = None
    proven: bool | None = Field(
        default=None,
        description="on a 409 'no plan meets the limits': whether that is proven (an exhaustive search "
        "covered every configuration with no bound violated) or only what a search stopped by its budget "
        "found (raise solve_budget_s or use mode exhaustive to settle it)",
    )
