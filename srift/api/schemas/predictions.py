"""Request and response schemas of POST /v1/predictions (one fleet's iteration time, total time and cost)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from srift.api.schemas.network import NetworkOut
from srift.api.schemas.plans import (
    CHECKPOINTING_DESCRIPTION,
    ONE_MODEL_RULE,
    PROFILE_SELECTION,
    SELECTION_TYPES,
    STRATEGY_DESCRIPTION,
    AnswerPrecision,
    BreakdownOut,
    ChoiceOut,
    PredictedOut,
    RunRequestIn,
    StrategyOut,
)
from srift.api.schemas.types import (
    TypeName,
    check_one_of,
    one_of,
    parse_request,
)
from srift.documents import StrictModel, field_defaults, publish_rules, read_document
from srift.domain import Market
from srift.domain.requests import FleetChoice, PredictionQuery
from srift.domain.sharding import StrategyChoice
from srift.limits import MAX_COUNT, MAX_PS_VMS, MAX_VM_BATCH
from srift.sim import CommMode

MAX_CHOICES = 32
MAX_MC_SAMPLES = 1000
MAX_STRAGGLER_ITERS = 10_000
MAX_PS_SERVERS = 64
MAX_SWEEP = 256


_PREDICT = field_defaults(PredictionQuery)
_CHOICE = field_defaults(FleetChoice)
"""The domain values own the prediction request's defaults (tests/api/test_request_defaults)."""


_CHOICE_HINTS = {
    "instance_type": "give a type the catalog lists (`srift catalog list`, GET /v1/instance-types)",
    "market": "use on_demand or spot",
    "count": f"give how many VMs of this type, 1 to {MAX_COUNT}",
    "batch": f"give the samples per VM per iteration, 1 to {MAX_VM_BATCH} (split evenly over its GPUs)",
    "gpus": "give how many of each VM's GPUs to use, 1 to 64, or leave gpus out to use them all",
}


class FleetChoiceIn(StrictModel):
    """`count` VMs of one instance type bought on one market, each given `batch` samples per iteration.

    The batch is per VM and is split evenly over the VM's GPUs (per-GPU batch = batch / gpu_count).
    """

    model_config = ConfigDict(extra="forbid")

    FIELD_HINTS: ClassVar[Mapping[str, str]] = _CHOICE_HINTS
    """Hints by field for errors the schema finds (srift.documents.field_hint), wherever a choice lies:
    `config.choices[i]` or `configs[j].choices[i]`, in a REST body or a CLI request file."""

    instance_type: TypeName = Field(description="e.g. p3.8xlarge")
    market: Market = Field(
        default=_CHOICE["market"], description="spot or on_demand: which catalog price bills it"
    )
    count: int = Field(ge=1, le=MAX_COUNT, description="how many VMs of this type")
    batch: int = Field(ge=1, le=MAX_VM_BATCH, description="samples per VM per iteration")
    gpus: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="use only this many of each VM's GPUs (default: all); the VM is still billed whole",
    )


CHOICES_DISTINCT = (
    "choices-distinct",
    "no two choices share instance_type and market (market defaults to on_demand)",
)
ONE_GPUS_PER_TYPE = (
    "one-gpus-per-type",
    "choices that name the same instance_type give the same gpus, or all leave it out",
)
PS_FLEET_SIZE = (
    "parameter-server-fleet-size",
    f"with comm parameter_server, the counts of each fleet (config, or each of configs) total at most "
    f"{MAX_PS_VMS}",
)
STRATEGY_NEEDED = (
    "checkpointing-needs-strategy",
    "checkpointing is given only with a strategy: without one the prediction is plain DDP without "
    "checkpointing, as before strategies existed",
)
STRATEGY_SIMULATED = (
    "strategy-as-planned",
    "with a strategy and mc_samples above 0 or comm parameter_server (which only plain DDP's simulator "
    "models: the sharded simulator models allreduce collectives without Monte Carlo samples), the "
    "strategy is ddp or auto and checkpointing is not true; the strategy then considers plain DDP "
    "without checkpointing alone (its strategy section's why says so). Each fleet is evaluated as a "
    "plan evaluates a candidate fleet under the strategy: the setups it allows (auto: every one when a "
    "profile carries the model's sharding facts or DDP cannot hold the model at batch 1, else DDP "
    "alone; checkpointing null: with and without) have their memory checked per GPU and the fastest "
    "that fits is predicted; no setup fitting is a 409 (field strategy, or the field that left plain "
    "DDP alone)",
)


class FleetConfigIn(StrictModel):
    """A fleet: one entry per instance type and market (Srift's counts[i] and batches[i])."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra=publish_rules(CHOICES_DISTINCT, ONE_GPUS_PER_TYPE)
    )

    choices: list[FleetChoiceIn] = Field(min_length=1, max_length=MAX_CHOICES)


class PredictionRequest(RunRequestIn):
    """Predict one fleet (`config`) or a sweep of fleets (`configs`, answered as `predictions`). Give the
    model's compute profiles as `profile_ids`, inline `profiles`, or `model` (every stored profile of that
    model); each chosen type uses the profile of its accelerator. `network` says how the nodes talk."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=publish_rules(
            ONE_MODEL_RULE,
            PS_FLEET_SIZE,
            STRATEGY_NEEDED,
            STRATEGY_SIMULATED,
            then={
                "allOf": [
                    one_of(*PROFILE_SELECTION, types=SELECTION_TYPES),
                    one_of("config", "configs", types={"config": "object", "configs": "array"}),
                ]
            },
        ),
    )

    config: FleetConfigIn | None = Field(default=None, description="one fleet (or give configs)")
    configs: list[FleetConfigIn] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SWEEP,
        description="several fleets predicted in one call (a sweep); the answer lists one prediction each",
    )
    comm: CommMode = Field(
        default=_PREDICT["comm"], description="allreduce (Srift) or parameter_server (Li et al.)"
    )
    ps_servers: int = Field(
        default=_PREDICT["ps_servers"],
        ge=1,
        le=MAX_PS_SERVERS,
        description="parameter servers (comm=parameter_server)",
    )
    seed: int = Field(
        default=_PREDICT["seed"], ge=0, le=2**31 - 1, description="seed of straggler and Monte Carlo sampling"
    )
    straggler_iters: int = Field(
        default=_PREDICT["straggler_iters"],
        ge=1,
        le=MAX_STRAGGLER_ITERS,
        description="iterations sampled for stragglers",
    )
    mc_samples: int = Field(
        default=_PREDICT["mc_samples"],
        ge=0,
        le=MAX_MC_SAMPLES,
        description="Monte Carlo samples of one iteration (stragglers, bandwidth-model error) for the "
        "stragglers term of the p10/p50/p90 band (0: straggler draws only); with a strategy, above 0 only "
        "for ddp or auto with checkpointing not true, which then consider plain DDP alone (rule "
        "strategy-as-planned)",
    )
    strategy: StrategyChoice | None = Field(
        default=_PREDICT["strategy"],
        description=f"{STRATEGY_DESCRIPTION}, as in a plan request; left out: plain DDP, and the answer has "
        "no strategy section",
    )
    checkpointing: bool | None = Field(
        default=_PREDICT["checkpointing"],
        description=f"{CHECKPOINTING_DESCRIPTION} (only with a strategy)",
    )

    @model_validator(mode="after")
    def _one_fleet(self) -> PredictionRequest:
        check_one_of(self, "config", "configs")
        return self

    def to_domain(self, *, owner: str | None = None) -> PredictionQuery:
        """The validated request as the services' PredictionQuery, asked by `owner` (the token's name)."""
        return read_document(PredictionQuery, {**self.model_dump(), "owner": owner})


def parse_prediction_request(data: Any) -> PredictionRequest:
    """Validate a prediction request document (CLI files), raising InvalidInput that names the field."""
    return parse_request(PredictionRequest, data)


class PredictionOut(BaseModel):
    """Predicted iteration time (mean and p10/p50/p90), totals for `iterations`, where the time goes, and what
    the prediction rests on (profiles, bandwidth model version or prior, network assumptions, prices)."""

    label: str = Field(description="Srift's notation, e.g. '4×p3.2xlarge@64'")
    choices: list[ChoiceOut]
    global_batch: int = Field(description="samples per iteration over the fleet")
    iterations: int
    comm: CommMode
    usd_per_hr: float = Field(description="the fleet's price per hour at the chosen markets")
    predicted: PredictedOut
    breakdown: BreakdownOut
    network: NetworkOut | None = Field(default=None, description="what was assumed between nodes")
    sources: list[str]
    warnings: list[str]
    precision: AnswerPrecision = None
    estimated: list[str] = Field(
        default_factory=list, description="instance types whose compute times are estimates, not measured"
    )
    strategy: StrategyOut | None = Field(
        default=None,
        exclude_if=lambda view: view is None,
        description="how the fleet runs under the request's strategy, as a plan's strategy section says: "
        "the setup predicted, its memory per GPU, and every setup compared (absent without a strategy)",
    )


class PredictionSweepOut(BaseModel):
    """One prediction per fleet of `configs`, in order."""

    predictions: list[PredictionOut]
    count: int
    network: NetworkOut | None = Field(
        default=None, description="what was assumed between nodes, over every type of the sweep"
    )
    elapsed_s: float = Field(description="seconds the service spent on the sweep (after start-up)")
