"""What a probe or profile job asks for: validated, frozen, and round-trippable through the jobs table."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from srift.domain.states import JobKind
from srift.errors import InvalidInput
from srift.limits import (
    MAX_EC2_COST_USD,
    MAX_EC2_INSTANCES,
    MAX_EC2_TIMEOUT_S,
    MAX_JOB_NODES,
    PROBE_BUFFER,
    PROBE_REPEATS,
    check_probe_grid,
)

DEFAULT_SIZES = tuple(1 << k for k in range(2, 27))  # 4 B .. 64 MiB
MAX_NODES = MAX_JOB_NODES
RESOURCE_ID_RE = re.compile(r"^[a-z]+-[0-9a-f]{8,32}$")
DEFAULT_INSTALL = "python3 -m pip install --quiet srift"
FACTORY_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


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

    @property
    def max_nodes(self) -> int:
        return max(self.node_counts)

    def to_dict(self) -> dict[str, Any]:
        plain: dict[str, Any] = _plain(asdict(self))
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


def _bad(field_name: str, message: str, hint: str) -> InvalidInput:
    return InvalidInput(message, hint=hint, field=field_name)


def _int(data: Mapping[str, Any], key: str, *, default: int | None, lo: int, hi: int, where: str = "") -> int:
    name = f"{where}{key}"
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(name, f"{key} must be an integer, got {value!r}", f"give {key} as a whole number")
    if not lo <= value <= hi:
        raise _bad(name, f"{key} must be in [{lo}, {hi}], got {value}", f"pick {key} in that range")
    return value


def _float(
    data: Mapping[str, Any], key: str, *, default: float, lo: float, hi: float, where: str = ""
) -> float:
    name = f"{where}{key}"
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise _bad(name, f"{key} must be a number, got {value!r}", f"give {key} as a number")
    if not lo < float(value) <= hi:
        raise _bad(name, f"{key} must be in ({lo:g}, {hi:g}], got {value}", f"pick {key} in that range")
    return float(value)


def _str(
    data: Mapping[str, Any], key: str, *, required: bool, where: str = "", max_len: int = 200
) -> str | None:
    name = f"{where}{key}"
    value = data.get(key)
    if value is None:
        if required:
            raise _bad(name, f"{key} is required", f"give {key}")
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > max_len or "\x00" in value:
        raise _bad(name, f"{key} must be a non-empty string of at most {max_len} characters", f"fix {key}")
    return value.strip()


def _provider(data: Mapping[str, Any]) -> JobProvider:
    try:
        return JobProvider(str(data.get("provider")))
    except ValueError:
        raise _bad(
            "provider", f"unknown provider {data.get('provider')!r}", "use local, testbed or ec2"
        ) from None


def _list(data: Mapping[str, Any], key: str, *, required: bool) -> list[Any] | None:
    value = data.get(key)
    if value is None:
        if required:
            raise _bad(key, f"{key} is required", f"give {key} as a list")
        return None
    if not isinstance(value, list | tuple) or not value:
        raise _bad(key, f"{key} must be a non-empty list", f"give {key} as a list")
    return list(value)


def _ec2(data: Mapping[str, Any], *, provider: JobProvider) -> Ec2Options | None:
    raw = data.get("ec2")
    if provider is not JobProvider.EC2:
        if raw is not None:
            raise _bad("ec2", "ec2 options are only for provider ec2", "drop `ec2`, or use provider ec2")
        return None
    if not isinstance(raw, Mapping):
        raise _bad("ec2", "provider ec2 needs `ec2` options (image_id, results_url, ...)", "add them")
    w = "ec2."
    allowed = {f.name for f in Ec2Options.__dataclass_fields__.values()}
    for key in raw:
        if key not in allowed:
            raise _bad(f"{w}{key}", f"unknown field {key!r}", f"use only {', '.join(sorted(allowed))}")
    image_id = _str(raw, "image_id", required=True, where=w)
    assert image_id is not None
    if not RESOURCE_ID_RE.match(image_id):
        raise _bad("ec2.image_id", f"{image_id!r} is not an AMI id", "give an id like ami-0123456789abcdef0")
    url = _str(raw, "results_url", required=True, where=w, max_len=500)
    assert url is not None
    if not url.startswith(("http://", "https://")):
        raise _bad(
            "ec2.results_url", "results_url must be an http(s) URL", "give this server's URL as VMs see it"
        )
    try:
        market = Ec2Market(str(raw.get("market", "on_demand")))
    except ValueError:
        raise _bad("ec2.market", f"unknown market {raw.get('market')!r}", "use on_demand or spot") from None
    groups = raw.get("security_group_ids") or []
    if not isinstance(groups, list | tuple) or not all(
        isinstance(g, str) and RESOURCE_ID_RE.match(g) for g in groups
    ):
        raise _bad(
            "ec2.security_group_ids", "security_group_ids must be a list of sg-... ids", "fix the list"
        )
    install = _str(raw, "install_command", required=False, where=w, max_len=2000)
    return Ec2Options(
        image_id=image_id,
        results_url=url.rstrip("/"),
        region=_str(raw, "region", required=False, where=w, max_len=32) or "us-east-1",
        market=market,
        subnet_id=_str(raw, "subnet_id", required=False, where=w, max_len=64),
        security_group_ids=tuple(groups),
        key_name=_str(raw, "key_name", required=False, where=w),
        iam_instance_profile=_str(raw, "iam_instance_profile", required=False, where=w),
        install_command=install or DEFAULT_INSTALL,
        max_instances=_int(raw, "max_instances", default=8, lo=1, hi=MAX_EC2_INSTANCES, where=w),
        max_cost_usd=_float(raw, "max_cost_usd", default=10.0, lo=0.0, hi=MAX_EC2_COST_USD, where=w),
        timeout_s=_float(raw, "timeout_s", default=3600.0, lo=0.0, hi=MAX_EC2_TIMEOUT_S, where=w),
    )


def _testbed_prefix(data: Mapping[str, Any], provider: JobProvider) -> str | None:
    value = data.get("testbed_prefix")
    if value is None:
        return None
    if provider is not JobProvider.TESTBED:
        raise _bad("testbed_prefix", "testbed_prefix is only for provider testbed", "drop it")
    if not isinstance(value, str) or not re.match(r"^[a-z0-9]{1,10}$", value):
        raise _bad(
            "testbed_prefix", f"{value!r} is not a testbed prefix", "give the prefix of a testbed that is up"
        )
    return value


_PROBE_KEYS = {f.name for f in ProbeJobSpec.__dataclass_fields__.values()}
_PROFILE_KEYS = {f.name for f in ProfileJobSpec.__dataclass_fields__.values()} | {"instance_type"}


def _unknown(data: Mapping[str, Any], allowed: set[str]) -> None:
    for key in data:
        if key not in allowed:
            raise _bad(str(key), f"unknown field {key!r}", f"use only {', '.join(sorted(allowed))}")


def parse_probe_job(data: Mapping[str, Any]) -> ProbeJobSpec:
    """Validate a probe job request; errors name the field (`sizes[2]`, `node_counts[0]`, ...)."""
    _unknown(data, _PROBE_KEYS)
    provider = _provider(data)
    instance_type = _str(data, "instance_type", required=True, max_len=128)
    assert instance_type is not None
    per_node = _int(data, "ranks_per_node", default=1, lo=1, hi=64)
    counts = _list(data, "node_counts", required=True) or []
    node_counts: list[int] = []
    for i, n in enumerate(counts):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise _bad(
                f"node_counts[{i}]", f"node count must be an integer ≥ 1, got {n!r}", "use 2 or more hosts"
            )
        if n * per_node < 2:
            raise _bad(
                f"node_counts[{i}]",
                f"world size {n}×{per_node} = {n * per_node} is below 2: an allreduce needs two ranks",
                "use at least 2 nodes (or 2 ranks per node)",
            )
        if n > MAX_NODES[provider.value]:
            raise _bad(
                f"node_counts[{i}]",
                f"{n} nodes is more than provider {provider} allows ({MAX_NODES[provider.value]})",
                "use fewer nodes",
            )
        node_counts.append(n)
    raw_sizes = _list(data, "sizes", required=False)
    sizes: list[int] = []
    for i, s in enumerate(raw_sizes if raw_sizes is not None else DEFAULT_SIZES):
        if isinstance(s, bool) or not isinstance(s, int) or s <= 0 or s % 4:
            raise _bad(
                f"sizes[{i}]",
                f"buffer size must be a positive multiple of 4 bytes, got {s!r}",
                "give sizes in bytes, e.g. [4, 1024, 1048576]",
            )
        PROBE_BUFFER.check(s, field=f"sizes[{i}]")
        sizes.append(s)
    check_probe_grid(buffer_sizes=len(set(sizes)), world_sizes=len(set(node_counts)))
    repeats = _int(data, "repeats", default=5, lo=1, hi=int(PROBE_REPEATS.maximum))
    backend = data.get("backend", "gloo")
    if backend not in ("gloo", "nccl"):
        raise _bad("backend", f"unknown backend {backend!r}", "use gloo or nccl")
    if backend == "nccl" and provider is not JobProvider.EC2:
        raise _bad("backend", f"provider {provider} has no GPUs for NCCL", "use gloo")
    if provider is JobProvider.LOCAL and per_node != 1:
        raise _bad("ranks_per_node", "provider local runs one rank per process", "leave ranks_per_node at 1")
    return ProbeJobSpec(
        provider=provider,
        instance_type=instance_type,
        node_counts=tuple(dict.fromkeys(node_counts)),
        sizes=tuple(sorted(set(sizes))),
        repeats=repeats,
        warmup=_int(data, "warmup", default=2, lo=0, hi=100),
        async_count=_int(data, "async_count", default=1, lo=1, hi=64),
        ranks_per_node=per_node,
        backend=str(backend),
        time_budget_s=_float(data, "time_budget_s", default=600.0, lo=0.0, hi=86400.0),
        testbed_prefix=_testbed_prefix(data, provider),
        ec2=_ec2(data, provider=provider),
    )


def parse_profile_job(data: Mapping[str, Any]) -> ProfileJobSpec:
    """Validate a profile job request (one `instance_type` or several `instance_types`)."""
    _unknown(data, _PROFILE_KEYS)
    provider = _provider(data)
    if (
        provider is JobProvider.LOCAL
        and data.get("instance_types") is None
        and data.get("instance_type") is None
    ):
        types: list[Any] = ["local"]
    elif data.get("instance_type") is not None:
        if data.get("instance_types") is not None:
            raise _bad("instance_type", "give instance_type or instance_types, not both", "keep one")
        types = [data["instance_type"]]
    else:
        types = _list(data, "instance_types", required=True) or []
    names: list[str] = []
    for i, t in enumerate(types):
        if not isinstance(t, str) or not t.strip() or len(t) > 128:
            raise _bad(f"instance_types[{i}]", f"{t!r} is not an instance type name", "give type names")
        names.append(t.strip())
    if len(names) > 16:
        raise _bad("instance_types", "at most 16 instance types per profile job", "split the job")
    model = _str(data, "model", required=True)
    input_ = _str(data, "input", required=True)
    for key, value in (("model", model), ("input", input_)):
        assert value is not None
        if not FACTORY_RE.match(value):
            raise _bad(key, f"{value!r} is not MODULE:FACTORY", "e.g. srift.profiling.testmodels:cnn")
    loss = _str(data, "loss", required=False)
    if loss is not None and not FACTORY_RE.match(loss):
        raise _bad("loss", f"{loss!r} is not MODULE:FN", "e.g. mypkg.losses:cross_entropy")
    max_batch = data.get("max_batch")
    if max_batch is not None:
        max_batch = _int(data, "max_batch", default=None, lo=1, hi=1_048_576)
    extra = data.get("extra_args") or []
    if not isinstance(extra, list | tuple) or not all(
        isinstance(a, str) and a.startswith("--") for a in extra
    ):
        raise _bad("extra_args", "extra_args must be a list of --options for `srift profile`", "fix the list")
    return ProfileJobSpec(
        provider=provider,
        instance_types=tuple(dict.fromkeys(names)),
        model=str(model),
        input=str(input_),
        loss=loss,
        model_name=_str(data, "model_name", required=False),
        max_batch=max_batch,
        repeats=_int(data, "repeats", default=7, lo=1, hi=100),
        iterations=_int(data, "iterations", default=30, lo=2, hi=10_000),
        time_budget_s=_float(data, "time_budget_s", default=1800.0, lo=0.0, hi=86400.0),
        testbed_prefix=_testbed_prefix(data, provider),
        ec2=_ec2(data, provider=provider),
        extra_args=tuple(extra),
    )


def spec_from_row(kind: str, request: Mapping[str, Any]) -> ProbeJobSpec | ProfileJobSpec:
    """Rebuild the spec stored in a job row."""
    return parse_probe_job(request) if kind == JobKind.PROBE else parse_profile_job(request)


def node_label(counts: Sequence[int]) -> str:
    return ",".join(str(n) for n in counts)
