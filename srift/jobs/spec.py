"""What a probe or profile job asks for: validated, frozen, and round-trippable through the jobs table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from srift.documents import (
    BLANKS,
    HTTP_URL,
    NOT_BLANK,
    NUMBER,
    WHOLE,
    StrictModel,
    publish_rules,
    rule_error,
    validated,
)
from srift.domain.states import JobKind
from srift.domain.structure import Precision
from srift.errors import InvalidInput
from srift.limits import (
    MAX_EC2_COST_USD,
    MAX_EC2_INSTANCES,
    MAX_EC2_TIMEOUT_S,
    MAX_JOB_NODES,
    MAX_NAME_CHARS,
    MAX_PROBE_BUFFER_BYTES,
    MAX_PROBE_REPEATS,
    MAX_VM_BATCH,
    PROBE_GRID,
    check_probe_grid,
)

DEFAULT_SIZES = tuple(1 << k for k in range(2, 27))  # 4 B .. 64 MiB
RESOURCE_ID = r"^[a-z]+-[0-9a-f]{8,32}$"
SUBNET_ID = r"^subnet-([0-9a-f]{8}|[0-9a-f]{17})$"
"""An AWS subnet id: `subnet-` and 8 hex digits (older subnets) or 17 (since 2016)."""
DEFAULT_INSTALL = "python3 -m pip install --quiet srift"
FACTORY = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$"


class JobProvider(StrEnum):
    """Where a job runs: this machine's processes, testbed hosts, or EC2 instances."""

    LOCAL = "local"
    TESTBED = "testbed"
    EC2 = "ec2"

    @property
    def catalog_provider(self) -> str | None:
        """The catalog provider its instance types come from (None: not catalogued)."""
        return {"local": None, "testbed": "testbed", "ec2": "aws"}[self.value]


class Ec2Market(StrEnum):
    ON_DEMAND = "on_demand"
    SPOT = "spot"


@dataclass(frozen=True, slots=True)
class Ec2Options:
    """How EC2 instances are launched for a job, and the caps that bound what it may spend.

    `results_url` is the base URL of this Srift server as the instances reach it; `install_command` runs
    first in the user-data (default installs srift, which brings torch). `max_cost_usd` bounds
    price × instances × `timeout_s`; instances are terminated after `timeout_s` whatever happens.
    """

    image_id: str
    results_url: str
    region: str = "us-east-1"
    market: Ec2Market = Ec2Market.ON_DEMAND
    subnet_id: str | None = None
    security_group_ids: tuple[str, ...] = ()
    key_name: str | None = None
    iam_instance_profile: str | None = None
    install_command: str = DEFAULT_INSTALL
    max_instances: int = 8
    max_cost_usd: float = 10.0
    timeout_s: float = 3600.0


@dataclass(frozen=True, slots=True)
class ProbeJobSpec:
    """An allreduce probe grid: one run per node count, each over `sizes` (bytes, multiples of 4)."""

    provider: JobProvider
    instance_type: str
    node_counts: tuple[int, ...]
    sizes: tuple[int, ...] = DEFAULT_SIZES
    repeats: int = 5
    warmup: int = 2
    async_count: int = 1
    ranks_per_node: int = 1
    backend: str = "gloo"
    time_budget_s: float = 600.0
    testbed_prefix: str | None = None
    ec2: Ec2Options | None = None
    collective: str = "allreduce"
    """allreduce, all_gather or reduce_scatter (probes/allreduce.py --collective)."""

    @property
    def max_nodes(self) -> int:
        return max(self.node_counts)

    def to_dict(self) -> dict[str, Any]:
        plain: dict[str, Any] = _plain(asdict(self))
        if plain.get("collective") == "allreduce":
            plain.pop("collective")
        return plain


@dataclass(frozen=True, slots=True)
class ProfileJobSpec:
    """Profile one model on each instance type (`srift profile` inside a host or instance of each)."""

    provider: JobProvider
    instance_types: tuple[str, ...]
    model: str
    input: str
    loss: str | None = None
    model_name: str | None = None
    max_batch: int | None = None
    repeats: int = 7
    iterations: int = 30
    time_budget_s: float = 1800.0
    testbed_prefix: str | None = None
    ec2: Ec2Options | None = None
    extra_args: tuple[str, ...] = field(default=())
    precision: Precision = Precision.FP32

    def to_dict(self) -> dict[str, Any]:
        plain: dict[str, Any] = _plain(asdict(self))
        return plain


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, StrEnum):
        return value.value
    return value


TypeName = Annotated[str, Field(min_length=1, max_length=128, pattern=NOT_BLANK), AfterValidator(str.strip)]
ONE_TYPE_TEXT = rf"^[^\x00+]*[^\x00+{BLANKS}][^\x00+]*$"
"""The schema pattern of a probe job's instance type: TypeName's rule (not blank, no NUL) and no '+', which
joins a mixed ring's types (a probe job runs one type; the server refuses a ring with its own words,
srift.jobs.service.check_probe_job, so the pattern is stated, not enforced by pydantic)."""
Text = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME_CHARS, pattern=NOT_BLANK), AfterValidator(str.strip)
]
ResourceId = Annotated[str, Field(pattern=RESOURCE_ID)]
Factory = Annotated[str, Field(min_length=3, max_length=200, pattern=FACTORY)]
Seconds = Annotated[float, Field(gt=0, le=86400), NUMBER]
TestbedPrefix = Annotated[str, Field(pattern=r"^[a-z0-9]{1,10}$")]
NodeCount = Annotated[int, Field(ge=1, le=max(MAX_JOB_NODES.values())), WHOLE]
BufferBytes = Annotated[int, Field(ge=4, le=MAX_PROBE_BUFFER_BYTES, multiple_of=4), WHOLE]
ExtraArg = Annotated[str, Field(min_length=3, max_length=200, pattern=r"^--[^\x00]+$")]

_HINTS = {
    "provider": "use local, testbed or ec2",
    "instance_type": "give a catalog type name (a local job: any name for this machine, e.g. local)",
    "sizes": "give sizes in bytes, multiples of 4, e.g. [4, 1024, 1048576]",
    "node_counts": "give hosts per run, e.g. [2, 4]",
    "model": "e.g. srift.profiling.testmodels:cnn",
    "input": "e.g. srift.profiling.testmodels:cnn_input",
    "loss": "e.g. mypkg.losses:cross_entropy",
    "extra_args": "give --options of `srift profile`",
    "testbed_prefix": "give the prefix of a testbed that is up",
    "ec2.image_id": "give an id like ami-0123456789abcdef0",
    "ec2.results_url": "give this server's http(s) URL as VMs see it",
    "ec2.security_group_ids": "give sg-... ids",
    "ec2.subnet_id": "give an id like subnet-0123456789abcdef0 (subnet- and 8 or 17 hex digits)",
}


class Ec2Document(StrictModel):
    """Launch options and caps of an EC2 job (instances are always terminated after `timeout_s`)."""

    model_config = ConfigDict(extra="forbid")

    image_id: ResourceId = Field(description="AMI with python3 (and CUDA drivers for NCCL), e.g. ami-0abc...")
    results_url: Annotated[
        str,
        Field(min_length=8, max_length=500, pattern=HTTP_URL),
        AfterValidator(lambda url: url.rstrip("/")),
    ] = Field(description="this server, as VMs see it")
    region: Annotated[
        str, Field(min_length=1, max_length=32, pattern=NOT_BLANK), AfterValidator(str.strip)
    ] = "us-east-1"
    market: Ec2Market = Ec2Market.ON_DEMAND
    subnet_id: Annotated[str, Field(pattern=SUBNET_ID)] | None = Field(
        default=None,
        description="subnet to launch in (default: the region's default VPC), e.g. subnet-0abc...",
    )
    security_group_ids: list[ResourceId] = Field(default_factory=list, max_length=10)
    key_name: Text | None = None
    iam_instance_profile: Text | None = None
    install_command: (
        Annotated[str, Field(min_length=1, max_length=2000, pattern=NOT_BLANK), AfterValidator(str.strip)]
        | None
    ) = Field(default=None, description="first user-data step (default: pip install srift)")
    max_instances: Annotated[int, Field(ge=1, le=MAX_EC2_INSTANCES), WHOLE] = Field(
        default=8, description="instance cap of the job"
    )
    max_cost_usd: Annotated[float, Field(gt=0, le=MAX_EC2_COST_USD), NUMBER] = Field(
        default=10.0, description="cap on price × instances × timeout"
    )
    timeout_s: Annotated[float, Field(gt=0, le=MAX_EC2_TIMEOUT_S), NUMBER] = Field(
        default=3600.0, description="instances are terminated after this"
    )

    def to_domain(self) -> Ec2Options:
        values = self.model_dump()
        values["security_group_ids"] = tuple(self.security_group_ids)
        values["install_command"] = self.install_command or DEFAULT_INSTALL
        return Ec2Options(**values)


def _null(*names: str) -> dict[str, Any]:
    return {name: {"type": "null"} for name in names}


def _world_of_two() -> dict[str, Any]:
    """node count × ranks_per_node ≥ 2, in JSON Schema: two ranks per node, or two nodes in every run."""
    return {
        "anyOf": [
            {"required": ["ranks_per_node"], "properties": {"ranks_per_node": {"minimum": 2}}},
            {"properties": {"node_counts": {"items": {"minimum": 2}}}},
        ]
    }


def _probe_schema(schema: dict[str, Any]) -> None:
    """The rules that depend on the provider, stated per provider (one branch each)."""
    nodes = {p: {"items": {"maximum": MAX_JOB_NODES[p.value]}} for p in JobProvider}
    schema["oneOf"] = [
        {
            "properties": {
                "provider": {"const": "local"},
                "node_counts": {"items": {"minimum": 2, "maximum": MAX_JOB_NODES["local"]}},
                "ranks_per_node": {"maximum": 1},
                "backend": {"const": "gloo"},
                **_null("testbed_prefix", "ec2"),
            }
        },
        {
            "properties": {
                "provider": {"const": "testbed"},
                "node_counts": nodes[JobProvider.TESTBED],
                "backend": {"const": "gloo"},
                **_null("ec2"),
            },
            **_world_of_two(),
        },
        {
            "required": ["ec2"],
            "properties": {
                "provider": {"const": "ec2"},
                "node_counts": nodes[JobProvider.EC2],
                "ec2": {"type": "object"},
                **_null("testbed_prefix"),
            },
            **_world_of_two(),
        },
    ]


def _no_ec2_off_ec2(data: Any) -> Any:
    """The body before its fields are read: `ec2` options under provider local or testbed are refused for
    being there, before pydantic reads them and reports a field missing inside them (a request file written
    for ec2, then switched to local, would otherwise be told to add `ec2.results_url`)."""
    if isinstance(data, dict) and data.get("ec2") is not None:
        provider = data.get("provider")
        if provider in (JobProvider.LOCAL.value, JobProvider.TESTBED.value):
            raise rule_error(
                f"ec2 options are only for provider ec2, and this job's provider is {provider}",
                field="ec2",
                hint="drop `ec2`, or use provider ec2",
            )
    return data


def _provider_rules(provider: JobProvider, *, ec2: Ec2Document | None, testbed_prefix: str | None) -> None:
    if provider is JobProvider.EC2 and ec2 is None:
        raise rule_error(
            "provider ec2 needs `ec2` options (image_id, results_url, ...)", field="ec2", hint="add them"
        )
    if provider is not JobProvider.EC2 and ec2 is not None:
        raise rule_error(
            "ec2 options are only for provider ec2", field="ec2", hint="drop `ec2`, or use provider ec2"
        )
    if testbed_prefix is not None and provider is not JobProvider.TESTBED:
        raise rule_error(
            "testbed_prefix is only for provider testbed", field="testbed_prefix", hint="drop it"
        )


GRID_RULE = (
    "probe-grid-size",
    f"distinct sizes (default: the {len(DEFAULT_SIZES)} default sizes) × distinct node_counts ≤ "
    f"{int(PROBE_GRID.maximum)}",
)
_EC2_CAP = Ec2Document.model_fields["max_instances"].default
EC2_PROBE_INSTANCES_RULE = (
    "ec2-instances-within-cap",
    f"with ec2, the largest node count is at most ec2.max_instances (default {_EC2_CAP})",
)
EC2_PROFILE_INSTANCES_RULE = (
    "ec2-instances-within-cap",
    "with ec2, the distinct instance types (one instance each) are at most ec2.max_instances "
    f"(default {_EC2_CAP})",
)


class ProbeJobDocument(BaseModel):
    """An allreduce probe grid to run: one run per node count over the buffer sizes.

    Rules across fields: node count × ranks_per_node ≥ 2; at most 64 (local), 16 (testbed) or 256 (ec2)
    nodes; local runs one rank per process and gloo; nccl needs ec2; `ec2` options exactly for ec2,
    `testbed_prefix` only for testbed; distinct sizes × distinct node counts ≤ the probe grid size limit.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=publish_rules(GRID_RULE, EC2_PROBE_INSTANCES_RULE, then=_probe_schema),
    )

    FIELD_HINTS: ClassVar[Mapping[str, str]] = _HINTS
    """Hints by field for errors the schema finds (srift.documents.field_hint): CLI files and REST bodies."""

    provider: JobProvider = Field(description="local (processes here), testbed (emulated hosts) or ec2")
    instance_type: TypeName = Field(
        description="a catalog type of the provider (testbed: provider testbed); one type, not a mixed "
        "ring (a+b)",
        json_schema_extra={"pattern": ONE_TYPE_TEXT},
    )
    node_counts: list[NodeCount] = Field(
        min_length=1,
        max_length=32,
        description="hosts per run, e.g. [2, 4]; at most 64 (local), 16 (testbed) or 256 (ec2), and "
        "node count × ranks_per_node ≥ 2",
    )
    sizes: list[BufferBytes] | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description="buffer sizes in bytes (multiples of 4); distinct sizes × distinct node counts ≤ "
        f"{int(PROBE_GRID.maximum)} (probe grid size)",
    )
    repeats: Annotated[int, Field(ge=1, le=MAX_PROBE_REPEATS), WHOLE] = Field(
        default=5, description="timed repetitions per size"
    )
    warmup: Annotated[int, Field(ge=0, le=100), WHOLE] = Field(
        default=2, description="untimed allreduces per size"
    )
    async_count: Annotated[int, Field(ge=1, le=64), WHOLE] = Field(
        default=1, description="concurrent asynchronous allreduces"
    )
    ranks_per_node: Annotated[int, Field(ge=1, le=64), WHOLE] = Field(
        default=1, description="ranks on each host (local: 1)"
    )
    backend: Literal["gloo", "nccl"] = Field(default="gloo", description="nccl: provider ec2 only")
    time_budget_s: Seconds = Field(default=600.0, description="per run")
    testbed_prefix: TestbedPrefix | None = Field(default=None, description="use this running testbed's hosts")
    ec2: Ec2Document | None = None
    collective: Literal["allreduce", "all_gather", "reduce_scatter"] = Field(
        default="allreduce", description="the collective probed (bus bandwidth as nccl-tests defines it)"
    )

    _ec2_only_for_ec2 = model_validator(mode="before")(_no_ec2_off_ec2)

    @model_validator(mode="after")
    def _rules(self) -> ProbeJobDocument:
        provider, per_node = self.provider, self.ranks_per_node
        cap = MAX_JOB_NODES[provider.value]
        for i, n in enumerate(self.node_counts):
            if n * per_node < 2:
                raise rule_error(
                    f"world size {n}×{per_node} = {n * per_node} is below 2: an allreduce needs two ranks",
                    field=f"node_counts[{i}]",
                    hint="use at least 2 nodes (or 2 ranks per node)",
                )
            if n > cap:
                raise rule_error(
                    f"{n} nodes is more than provider {provider} allows ({cap})",
                    field=f"node_counts[{i}]",
                    hint="use fewer nodes",
                )
        sizes = self.sizes if self.sizes is not None else DEFAULT_SIZES
        try:
            check_probe_grid(buffer_sizes=len(set(sizes)), world_sizes=len(set(self.node_counts)))
        except InvalidInput as exc:
            raise rule_error(exc.detail, field=exc.field or "sizes", hint=exc.hint or "") from None
        if self.backend == "nccl" and provider is not JobProvider.EC2:
            raise rule_error(f"provider {provider} has no GPUs for NCCL", field="backend", hint="use gloo")
        if provider is JobProvider.LOCAL and per_node != 1:
            raise rule_error(
                "provider local runs one rank per process",
                field="ranks_per_node",
                hint="leave ranks_per_node at 1",
            )
        _provider_rules(provider, ec2=self.ec2, testbed_prefix=self.testbed_prefix)
        return self

    def to_domain(self) -> ProbeJobSpec:
        sizes = self.sizes if self.sizes is not None else DEFAULT_SIZES
        return ProbeJobSpec(
            provider=self.provider,
            instance_type=self.instance_type,
            node_counts=tuple(dict.fromkeys(self.node_counts)),
            sizes=tuple(sorted(set(sizes))),
            repeats=self.repeats,
            warmup=self.warmup,
            async_count=self.async_count,
            ranks_per_node=self.ranks_per_node,
            backend=self.backend,
            time_budget_s=self.time_budget_s,
            testbed_prefix=self.testbed_prefix,
            ec2=self.ec2.to_domain() if self.ec2 is not None else None,
            collective=self.collective,
        )


def _profile_schema(schema: dict[str, Any]) -> None:
    """Per provider: `ec2` exactly for ec2, `testbed_prefix` only for testbed, instance types named unless
    local; for all: not both `instance_type` and `instance_types`."""
    named = {
        "anyOf": [
            {"required": ["instance_type"], "properties": {"instance_type": {"type": "string"}}},
            {"required": ["instance_types"], "properties": {"instance_types": {"type": "array"}}},
        ]
    }
    schema["anyOf"] = [
        {"properties": _null("instance_type")},
        {"properties": _null("instance_types")},
    ]
    schema["oneOf"] = [
        {"properties": {"provider": {"const": "local"}, **_null("testbed_prefix", "ec2")}},
        {"properties": {"provider": {"const": "testbed"}, **_null("ec2")}, **named},
        {
            "required": ["ec2"],
            "properties": {
                "provider": {"const": "ec2"},
                "ec2": {"type": "object"},
                **_null("testbed_prefix"),
            },
            "allOf": [named],
        },
    ]


class ProfileJobDocument(BaseModel):
    """A model to profile with `srift profile` on each instance type (`instance_type` or
    `instance_types`, not both; provider local may name none)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra=publish_rules(EC2_PROFILE_INSTANCES_RULE, then=_profile_schema)
    )

    FIELD_HINTS: ClassVar[Mapping[str, str]] = _HINTS
    """Hints by field for errors the schema finds (srift.documents.field_hint): CLI files and REST bodies."""

    provider: JobProvider
    instance_type: TypeName | None = None
    instance_types: list[TypeName] | None = Field(default=None, min_length=1, max_length=16)
    model: Factory = Field(description="MODULE:FACTORY returning the torch.nn.Module")
    input: Factory = Field(description="MODULE:FACTORY of the batch size returning the input")
    loss: Factory | None = Field(default=None, description="MODULE:FUNCTION of (output, batch) → loss")
    model_name: Text | None = None
    max_batch: Annotated[int, Field(ge=1, le=MAX_VM_BATCH), WHOLE] | None = Field(
        default=None, description="largest batch to try"
    )
    repeats: Annotated[int, Field(ge=1, le=100), WHOLE] = Field(
        default=7, description="timed repetitions per batch"
    )
    iterations: Annotated[int, Field(ge=2, le=10_000), WHOLE] = Field(
        default=30, description="iterations per timing"
    )
    time_budget_s: Seconds = 1800.0
    testbed_prefix: TestbedPrefix | None = None
    ec2: Ec2Document | None = None
    extra_args: list[ExtraArg] = Field(
        default_factory=list, max_length=20, description="--options for `srift profile`, e.g. --paper-curve"
    )
    precision: Precision = Field(
        default=Precision.FP32,
        description="arithmetic to profile in: fp32, tf32, fp16 or bf16 (autocast); GPU types are profiled "
        "on their GPU (`srift profile --device cuda`)",
    )

    _ec2_only_for_ec2 = model_validator(mode="before")(_no_ec2_off_ec2)

    @model_validator(mode="after")
    def _rules(self) -> ProfileJobDocument:
        if self.instance_type is not None and self.instance_types is not None:
            raise rule_error(
                "give instance_type or instance_types, not both", field="instance_type", hint="keep one"
            )
        if self.provider is not JobProvider.LOCAL and self.instance_type is None and not self.instance_types:
            raise rule_error(
                "instance_types is required", field="instance_types", hint="give instance_types as a list"
            )
        _provider_rules(self.provider, ec2=self.ec2, testbed_prefix=self.testbed_prefix)
        return self

    def to_domain(self) -> ProfileJobSpec:
        if self.instance_type is not None:
            names = [self.instance_type]
        else:
            names = list(self.instance_types or ["local"])
        return ProfileJobSpec(
            provider=self.provider,
            instance_types=tuple(dict.fromkeys(names)),
            model=self.model,
            input=self.input,
            loss=self.loss,
            model_name=self.model_name,
            max_batch=self.max_batch,
            repeats=self.repeats,
            iterations=self.iterations,
            time_budget_s=self.time_budget_s,
            testbed_prefix=self.testbed_prefix,
            ec2=self.ec2.to_domain() if self.ec2 is not None else None,
            extra_args=tuple(self.extra_args),
            precision=self.precision,
        )


def _read(model: type[Any], data: Mapping[str, Any]) -> Any:
    if not isinstance(data, Mapping):
        raise InvalidInput("a job request must be a mapping", hint="write the request as a mapping")
    return validated(model, dict(data))


def parse_probe_job(data: Mapping[str, Any]) -> ProbeJobSpec:
    """Validate a probe job request; errors name the field (`sizes[2]`, `node_counts[0]`, ...)."""
    spec: ProbeJobSpec = _read(ProbeJobDocument, data).to_domain()
    return spec


def parse_profile_job(data: Mapping[str, Any]) -> ProfileJobSpec:
    """Validate a profile job request (one `instance_type` or several `instance_types`)."""
    spec: ProfileJobSpec = _read(ProfileJobDocument, data).to_domain()
    return spec


def spec_from_row(kind: str, request: Mapping[str, Any]) -> ProbeJobSpec | ProfileJobSpec:
    """Rebuild the spec stored in a job row."""
    return parse_probe_job(request) if kind == JobKind.PROBE else parse_profile_job(request)


def node_label(counts: Sequence[int]) -> str:
    return ",".join(str(n) for n in counts)
