"""What validation runs: the models, the fleets (host counts 1..4, mixed types included) and per-VM batches.

A fleet is a list of groups (instance type, count, per-VM batch), Srift's counts[i] and batches[i]. Fleets
are kept to what the testbed has (hosts per type) and to `max_cores` of CPU quota running at once, so that
the hosts' quotas are real on this machine. The quick matrix runs one batch per VM (32) on every fleet plus
a mixed-batch variant of each mixed fleet (the weaker type gets the smaller batch, as Srift would); the full
matrix adds batches 16 and 48 and every host composition up to four hosts.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from srift.errors import InvalidInput
from srift.testbed import TestbedSpec

TESTMODELS = "srift.profiling.testmodels"


DEFAULT_LOSS = "srift.profiling.profiler:default_loss"
"""The loss the profiler backpropagates when none is given; the DDP runs use the same one."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model of the matrix: its factory, input factory and loss (MODULE:CALLABLE or FILE.py:CALLABLE).

    `name` is how the report names it: a shipped model's short name, or the factory as the user wrote it.
    """

    name: str
    factory: str
    input_factory: str
    loss: str | None = None

    @property
    def module(self) -> str | None:
        """The factory's importable module (None for a FILE.py:CALLABLE factory)."""
        module = self.factory.partition(":")[0]
        return None if module.endswith(".py") or "/" in module else module

    @property
    def run_loss(self) -> str:
        """The loss the profile and the DDP runs use: the user's, or the profiler's default."""
        return self.loss or DEFAULT_LOSS


MODELS: dict[str, ModelSpec] = {
    name: ModelSpec(name, f"{TESTMODELS}:{name}", f"{TESTMODELS}:{name}_input")
    for name in ("cnn", "wide_mlp", "transformer")
}

SHARDED_MODEL = ModelSpec(
    "blocks", "srift.validation.shardmodels:blocks", "srift.validation.shardmodels:blocks_input"
)
"""The model of the sharded cases (srift.validation.sharded): 57.5 MB of blocks, big enough to shard."""


def user_models(
    factories: Sequence[str], inputs: Sequence[str], losses: Sequence[str] = ()
) -> tuple[ModelSpec, ...]:
    """The user's models from repeated --model/--input/--loss options, paired by position.

    Every --model needs its --input; --loss is given not at all, once (for every model) or once per model.
    A FILE.py:CALLABLE is made absolute, since the testbed's hosts run elsewhere. Each model is named by the
    factory as given.
    """
    if len(inputs) != len(factories):
        raise InvalidInput(
            f"{len(factories)} --model and {len(inputs)} --input options",
            hint="give one --input MODULE:FACTORY (a callable of the batch size) after each --model",
            field="input",
        )
    if len(losses) not in (0, 1, len(factories)):
        raise InvalidInput(
            f"{len(losses)} --loss options for {len(factories)} --model options",
            hint="give --loss once (it applies to every --model) or once per --model",
            field="loss",
        )
    out = []
    for i, (factory, input_factory) in enumerate(zip(factories, inputs, strict=True)):
        loss = losses[0] if len(losses) == 1 else losses[i] if losses else None
        for what, text in (("model", factory), ("input", input_factory), ("loss", loss)):
            if text is not None and (":" not in text or not all(text.partition(":")[::2])):
                raise InvalidInput(
                    f"{text!r} is not MODULE:CALLABLE",
                    hint="write e.g. mypkg.models:build or train.py:build",
                    field=f"{what}[{i}]",
                )
        out.append(
            ModelSpec(
                factory,
                _absolute(factory),
                _absolute(input_factory),
                _absolute(loss) if loss is not None else None,
            )
        )
    names = [m.name for m in out]
    clash = sorted({n for n in names if names.count(n) > 1} | (set(names) & set(MODELS)))
    if clash:
        raise InvalidInput(
            f"model {clash[0]!r} is given twice",
            hint="give each --model once",
            field="model",
        )
    return tuple(out)


def _absolute(spec: str) -> str:
    import os

    module, _, attr = spec.partition(":")
    if module.endswith(".py") or os.sep in module:
        return f"{os.path.abspath(os.path.expanduser(module))}:{attr}"
    return spec


@dataclass(frozen=True, slots=True)
class Group:
    """`count` hosts of one type, each training on `batch` samples per iteration; `location` is the
    testbed location they sit in (None: a spec without locations)."""

    type_name: str
    count: int
    batch: int
    location: str | None = None


@dataclass(frozen=True, slots=True)
class Fleet:
    """Groups in rank order."""

    groups: tuple[Group, ...]

    @property
    def hosts(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def batches(self) -> tuple[int, ...]:
        """Per-rank batches, rank order."""
        return tuple(g.batch for g in self.groups for _ in range(g.count))

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(g.type_name for g in self.groups))

    @property
    def mixed(self) -> bool:
        return len(self.types) > 1

    @property
    def locations(self) -> tuple[str, ...]:
        """The testbed locations of the fleet, in rank order (empty for a spec without locations)."""
        return tuple(dict.fromkeys(g.location for g in self.groups if g.location is not None))

    @property
    def across(self) -> bool:
        """True when the fleet spans two or more locations."""
        return len(self.locations) > 1

    def cores(self, spec: TestbedSpec) -> float:
        return sum(g.count * spec.type_named(g.type_name).cpu_cores for g in self.groups)

    def label(self) -> str:
        """Srift's notation, e.g. "2×tbv.small@32 + 1×tbv.large@48"; with ` [east]` after each group when
        the fleet spans locations."""
        where = self.across
        return " + ".join(
            f"{g.count}×{g.type_name}@{g.batch}" + (f" [{g.location}]" if where else "") for g in self.groups
        )

    def composition(self) -> str:
        """Type counts without batches, e.g. "2×tbv.small + 1×tbv.large"."""
        counts: dict[str, int] = {}
        for g in self.groups:
            counts[g.type_name] = counts.get(g.type_name, 0) + g.count
        return " + ".join(f"{n}×{t}" for t, n in counts.items())


@dataclass(frozen=True, slots=True)
class Case:
    """One model on one fleet, trained with `strategy` (ddp, or a sharded one: srift.validation.sharded)."""

    model: str
    fleet: Fleet
    strategy: str = "ddp"

    @property
    def key(self) -> str:
        where = "" if self.strategy == "ddp" else f" [{self.strategy}]"
        return f"{self.model} | {self.fleet.label()}{where}"


def types_by_cpu(spec: TestbedSpec) -> list[str]:
    """The spec's type names, weakest CPU first (then slowest link, then name)."""
    return [t.name for t in sorted(spec.types, key=lambda t: (t.cpu_cores, t.rate_mbit, t.name))]


def check_spec(spec: TestbedSpec) -> None:
    """Validation needs two types that differ in both CPU quota and link rate."""
    for a, b in itertools.combinations(spec.types, 2):
        if a.cpu_cores != b.cpu_cores and a.rate_mbit != b.rate_mbit:
            return
    raise InvalidInput(
        "the testbed spec needs at least two instance types that differ in cpu_cores and rate_mbit",
        hint="add a type with a different CPU quota and link rate (see srift/validation/testbed.yaml)",
        field="types",
    )


def _hosts_of(spec: TestbedSpec, location: str | None = None) -> dict[str, int]:
    counts: dict[str, int] = {}
    for h in spec.hosts:
        if location is None or spec.location_of(h.name) == location:
            counts[h.type_name] = counts.get(h.type_name, 0) + 1
    return counts


def home_location(spec: TestbedSpec) -> str | None:
    """Where fleets inside one location run: the location of the spec's first host (None: no locations)."""
    return spec.location_of(spec.hosts[0].name) if spec.locations else None


def across_fleets(
    spec: TestbedSpec, *, max_hosts: int, max_cores: float, full: bool, batch: int
) -> list[Fleet]:
    """Fleets split evenly over two linked locations: the home location and each other one linked to it,
    n hosts of one type in each (quick: 1 and 2; full: 1 up to what both hold), and one host of each of two
    types in each, within `max_hosts` and `max_cores`. Ranks go location by location, so the ring crosses
    the link twice, as in the simulator's location level."""
    home = home_location(spec)
    if home is None:
        return []
    here = _hosts_of(spec, home)
    out: list[Fleet] = []
    for loc in spec.locations:
        if loc.name == home or spec.link_between(home, loc.name) is None:
            continue
        there = _hosts_of(spec, loc.name)
        for name in types_by_cpu(spec):
            most = min(here.get(name, 0), there.get(name, 0), max_hosts // 2)
            for n in range(1, most + 1) if full else (1, 2):
                if n > most or 2 * n * spec.type_named(name).cpu_cores > max_cores + 1e-9:
                    continue
                out.append(Fleet((Group(name, n, batch, home), Group(name, n, batch, loc.name))))
        for weak, strong in itertools.combinations(types_by_cpu(spec), 2):
            if (
                min(here.get(t, 0) for t in (weak, strong)) < 1
                or min(there.get(t, 0) for t in (weak, strong)) < 1
            ):
                continue
            cores = 2 * (spec.type_named(weak).cpu_cores + spec.type_named(strong).cpu_cores)
            if max_hosts >= 4 and cores <= max_cores + 1e-9:
                out.append(
                    Fleet(
                        tuple(Group(t, 1, batch, where) for where in (home, loc.name) for t in (weak, strong))
                    )
                )
    return out


def compositions(spec: TestbedSpec, *, max_hosts: int, max_cores: float, full: bool) -> list[dict[str, int]]:
    """Type → count maps (1..max_hosts hosts) that the testbed holds within `max_cores` of quota.

    Quick: 1, 2 and 4 hosts of each type alone, and for each pair of types 1+1 and 2+2. Full: every
    composition of up to `max_hosts` hosts over at most two types. With locations, the hosts of the home
    location (`home_location`) bound them.
    """
    available = _hosts_of(spec, home_location(spec))
    names = types_by_cpu(spec)
    wanted: list[dict[str, int]] = []
    sizes = range(1, max_hosts + 1) if full else (1, 2, 4)
    for name in names:
        wanted += [{name: n} for n in sizes]
    for a, b in itertools.combinations(names, 2):
        if full:
            wanted += [{a: i, b: j} for i in range(1, max_hosts) for j in range(1, max_hosts - i + 1)]
        else:
            wanted += [{a: 1, b: 1}, {a: 2, b: 2}]
    out = []
    for comp in wanted:
        if sum(comp.values()) > max_hosts or any(n > available.get(t, 0) for t, n in comp.items()):
            continue
        if sum(n * spec.type_named(t).cpu_cores for t, n in comp.items()) > max_cores + 1e-9:
            continue
        out.append(comp)
    return out


def check_model_names(models: Sequence[str], *, known: Sequence[str] = tuple(MODELS)) -> None:
    """Refuse a name of `models` that is not one of `known` (the shipped models, or the run's): InvalidInput
    on `models` listing the shipped ones."""
    for name in models:
        if name not in known:
            raise InvalidInput(
                f"unknown model {name!r}",
                hint=f"use some of: {', '.join(MODELS)}, or give your own with --model/--input",
                field="models",
            )


def build_matrix(
    spec: TestbedSpec,
    *,
    models: Sequence[str],
    known: Sequence[str] = tuple(MODELS),
    full: bool,
    max_cores: float,
    max_hosts: int = 4,
    batch: int = 32,
    low_batch: int = 16,
    high_batch: int = 48,
) -> list[Case]:
    """The cases of the quick or full matrix (see the module docstring)."""
    check_model_names(models, known=known)
    order = {name: i for i, name in enumerate(types_by_cpu(spec))}
    home = home_location(spec)
    fleets: list[Fleet] = []
    uniform = (low_batch, batch, high_batch) if full else (batch,)
    for comp in compositions(spec, max_hosts=max_hosts, max_cores=max_cores, full=full):
        ordered = sorted(comp.items(), key=lambda kv: order[kv[0]])
        for b in uniform:
            fleets.append(Fleet(tuple(Group(t, n, b, home) for t, n in ordered)))
        if len(ordered) > 1:
            weak, strong = ordered[0], ordered[-1]
            mixed = [
                Group(t, n, low_batch if t == weak[0] else high_batch if t == strong[0] else batch, home)
                for t, n in ordered
            ]
            fleets.append(Fleet(tuple(mixed)))
    fleets += across_fleets(spec, max_hosts=max_hosts, max_cores=max_cores, full=full, batch=batch)
    return [Case(model, fleet) for model in models for fleet in fleets]
