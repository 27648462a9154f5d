"""Which offers a user's framework stack can run and which families are retired: rules over shipped facts.

The facts live in `srift/catalog/specs/support.yaml` (format srift-support/1, every fact with its source):
the compute capabilities each CUDA toolkit line builds for, the PyTorch wheels that build for fewer, and
per provider the instance families that are previous generation or retired. A GPU's compute capability
is its accelerator spec's (`srift/catalog/specs/accelerators.yaml`).

`runnable_offers` is the plan pipeline's exclusion phase: it keeps the offers whose GPUs the stack has
kernels for and whose family is not retired (unless retired ones are asked for), and says in words what
it left out and why. CPU types and GPUs without a known spec are kept (nothing says they cannot run).
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from srift.catalog.accelerators import spec_for_instance
from srift.domain.catalog import InstanceType, Lifecycle, Offer
from srift.domain.requests import FrameworkStack
from srift.errors import ConfigurationError, InvalidInput

FORMAT = "srift-support/1"
VERSION = re.compile(r"^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})(\.(0|[1-9][0-9]{0,3}))?$")
"""A version the stack may give: major.minor or major.minor.patch ("2.13", "12.6", "12.8.1")."""

Version = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CudaLine:
    """A CUDA toolkit line: from version `since`, the compute capabilities it builds for."""

    since: Version
    min_cc: Version
    max_cc: Version
    source: str


@dataclass(frozen=True, slots=True)
class WheelRule:
    """From torch `torch` on, official builds with CUDA `cuda` or newer support `min_cc` and up."""

    torch: Version
    cuda: Version
    min_cc: Version
    source: str


@dataclass(frozen=True, slots=True)
class FamilyStatus:
    """A provider's instance family that is not current, from `since` on, and why we say so."""

    provider: str
    family: str
    status: Lifecycle
    since: dt.date
    why: str
    source: str
    source_keys: str


@dataclass(frozen=True, slots=True)
class SupportFacts:
    """The shipped support facts (see the module docstring)."""

    cuda: tuple[CudaLine, ...]
    wheels: tuple[WheelRule, ...]
    families: tuple[FamilyStatus, ...]
    sources: Mapping[str, str]


def parse_version(text: str, *, field: str) -> Version:
    """(major, minor[, patch]) of a version string; InvalidInput naming `field` otherwise."""
    if not VERSION.match(text):
        raise InvalidInput(
            f"{text!r} is not a version",
            hint='give major.minor, e.g. "2.13" for torch or "12.6" for cuda',
            field=field,
        )
    return tuple(int(x) for x in text.split("."))


def parse_support(document: Any, *, where: str = "support.yaml") -> SupportFacts:
    """Validate a srift-support/1 document; ConfigurationError names the entry and field at fault."""

    def fail(detail: str, field: str) -> ConfigurationError:
        return ConfigurationError(f"{where}: {detail}", hint="fix the shipped support facts", field=field)

    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise fail(f"not a {FORMAT} document", "format")
    sources = {k: str(v["text"]) for k, v in (document.get("sources") or {}).items()}

    def cited(raw: Any, at: str) -> str:
        names = [s.strip() for s in str(raw.get("source") or "").split(";")]
        missing = [n for n in names if n not in sources]
        if missing or not names:
            raise fail(f"source {missing or raw.get('source')!r} is not listed under sources", f"{at}.source")
        return " ".join(sources[n] for n in names)

    def version(raw: Any, key: str, at: str) -> Version:
        try:
            return parse_version(str(raw.get(key)), field=f"{at}.{key}")
        except InvalidInput:
            raise fail(f"{key} {raw.get(key)!r} is not a version", f"{at}.{key}") from None

    def versions(raw: Any, at: str, *keys: str) -> tuple[Version, Version, Version]:
        """The three versions under `keys` of the entry `raw` at `at`, in order."""
        first, second, third = (version(raw, key, at) for key in keys)
        return first, second, third

    def listed(key: str) -> Iterator[tuple[Any, str]]:
        """Each entry of the list under `key`, with its field path (`cuda[2]`)."""
        for i, raw in enumerate(document.get(key) or []):
            yield raw, f"{key}[{i}]"

    # the fields of CudaLine and WheelRule in their order: the versions, then the source
    cuda = tuple(
        CudaLine(*versions(raw, at, "from", "min_cc", "max_cc"), cited(raw, at)) for raw, at in listed("cuda")
    )
    if not cuda or [c.since for c in cuda] != sorted({c.since for c in cuda}):
        raise fail("cuda lines must be given in increasing `from` order, each once", "cuda")
    wheels = tuple(
        WheelRule(*versions(raw, at, "torch", "cuda", "min_cc"), cited(raw, at))
        for raw, at in listed("pytorch")
    )
    families = []
    for provider, entries in (document.get("lifecycle") or {}).items():
        for i, raw in enumerate(entries or []):
            at = f"lifecycle.{provider}[{i}]"
            try:
                status = Lifecycle(raw.get("status"))
                since = dt.date.fromisoformat(str(raw.get("since")))
            except ValueError:
                raise fail("status must be current, previous or retired and since a date", at) from None
            families.append(
                FamilyStatus(
                    provider=str(provider),
                    family=str(raw["family"]),
                    status=status,
                    since=since,
                    why=str(raw.get("why") or status.value),
                    source=cited(raw, at),
                    source_keys=str(raw.get("source")),
                )
            )
    return SupportFacts(cuda, wheels, tuple(families), sources)


@functools.lru_cache(maxsize=1)
def support_facts() -> SupportFacts:
    """The shipped support facts (read once)."""
    text = resources.files("srift.catalog").joinpath("specs/support.yaml").read_text()
    return parse_support(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))


def _fmt(version: Version) -> str:
    return ".".join(str(x) for x in version)


def capability_range(
    stack: FrameworkStack, *, facts: SupportFacts | None = None
) -> tuple[Version, Version, str]:
    """(least, greatest) compute capability the stack builds for, and the facts that say so; InvalidInput
    on `stack.torch` / `stack.cuda` for versions that are not versions or predate the facts."""
    facts = facts or support_facts()
    torch = parse_version(stack.torch, field="stack.torch")
    cuda = parse_version(stack.cuda, field="stack.cuda")
    lines = [c for c in facts.cuda if c.since <= cuda]
    if not lines:
        raise InvalidInput(
            f"CUDA {stack.cuda} predates the support facts (CUDA {_fmt(facts.cuda[0].since)} and later)",
            hint=f"give cuda {_fmt(facts.cuda[0].since)} or newer",
            field="stack.cuda",
        )
    line = lines[-1]
    least, why = (
        line.min_cc,
        f"CUDA {stack.cuda} builds for compute capability {_fmt(line.min_cc)} to {_fmt(line.max_cc)}",
    )
    for rule in facts.wheels:
        if torch >= rule.torch and cuda >= rule.cuda and rule.min_cc > least:
            least = rule.min_cc
            why = (
                f"PyTorch {stack.torch}'s CUDA {stack.cuda} builds run compute capability "
                f"{_fmt(rule.min_cc)} to {_fmt(line.max_cc)}"
            )
    return least, line.max_cc, why


def family_of(instance: InstanceType) -> str:
    """The instance family: the type name before its first dot (p3dn.24xlarge → p3dn)."""
    return instance.name.split(".", 1)[0]


def lifecycle(
    instance: InstanceType, *, on: dt.date | None = None, facts: SupportFacts | None = None
) -> FamilyStatus | None:
    """The family's status entry when it is not current (on date `on`, default: now), else None."""
    facts = facts or support_facts()
    family = family_of(instance)
    for entry in facts.families:
        if entry.provider == instance.provider and entry.family == family:
            return entry if on is None or on >= entry.since else None
    return None


def compute_capability(instance: InstanceType) -> str:
    """The GPUs' compute capability ("8.0"), or "" for CPU types and GPUs without a spec."""
    spec = spec_for_instance(instance)
    return spec.compute_capability if spec is not None else ""


@dataclass(frozen=True, slots=True)
class Exclusion:
    """Why a type is left out, and what would let it in."""

    detail: str
    fix: str


@dataclass(frozen=True, slots=True)
class Exclusions:
    """What the exclusion phase kept, and per type left out why (for notes and errors)."""

    kept: tuple[Offer, ...]
    reasons: Mapping[str, Exclusion]
    notes: tuple[str, ...]


def exclusion(
    offer: Offer, *, stack: FrameworkStack, include_retired: bool, facts: SupportFacts | None = None
) -> Exclusion | None:
    """Why the stack cannot use this offer (its GPUs' compute capability, or a retired family unless
    `include_retired`), or None when it can. A family is judged on the date its offer was priced."""
    facts = facts or support_facts()
    least, most, why = capability_range(stack, facts=facts)
    inst = offer.instance
    spec = spec_for_instance(inst)
    cap = spec.capability if spec is not None else None
    if spec is not None and cap is not None and not least <= cap <= most:
        return Exclusion(
            f"{spec.name} GPUs have compute capability {spec.compute_capability} and {why}",
            f"give a stack whose CUDA and PyTorch build for {spec.compute_capability}",
        )
    status = lifecycle(inst, on=offer.as_of, facts=facts)
    if status is not None and status.status is Lifecycle.RETIRED and not include_retired:
        return Exclusion(
            f"{inst.provider} no longer offers the {family_of(inst)} family (retired: {status.why}; "
            f"sources {status.source_keys}, srift/catalog/specs/support.yaml)",
            "set include_retired: true to plan with retired families anyway",
        )
    return None


def runnable_offers(
    offers: Sequence[Offer],
    *,
    stack: FrameworkStack,
    include_retired: bool,
    named: Sequence[str] = (),
    facts: SupportFacts | None = None,
) -> Exclusions:
    """The offers the stack can run and that are not retired (unless `include_retired`), with notes.

    `named` are types the request names (availability): naming one that is left out is an InvalidInput on
    `availability.<type>` that says why, rather than an unknown type.
    """
    facts = facts or support_facts()
    kept: list[Offer] = []
    by_reason: dict[Exclusion, list[str]] = {}
    reasons: dict[str, Exclusion] = {}
    for offer in offers:
        why = exclusion(offer, stack=stack, include_retired=include_retired, facts=facts)
        if why is None:
            kept.append(offer)
            continue
        reasons[offer.instance.name] = why
        names = by_reason.setdefault(why, [])
        if offer.instance.name not in names:
            names.append(offer.instance.name)
    for name in named:
        why = reasons.get(name)
        if why is not None and not any(o.instance.name == name for o in kept):
            raise InvalidInput(
                f"{name} is left out: {why.detail}", hint=why.fix, field=f"availability.{name}"
            )
    notes = tuple(
        f"left out {', '.join(sorted(names))}: {why.detail} (to use them: {why.fix})"
        for why, names in by_reason.items()
    )
    return Exclusions(tuple(kept), reasons, notes)
