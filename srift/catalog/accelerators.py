"""Accelerator specs in the catalog: datasheet figures, and how instance types and profiles map to them.

The figures live in `srift/catalog/specs/accelerators.yaml` (format srift-accelerators/1, every figure with
its vendor source); they are read once, on first use. An instance type maps to the spec whose `match` has
its `gpu_model` and the GPU memory nearest to the type's; a profile's accelerator label maps by the CUDA
device names and labels a spec lists (exact, case and punctuation aside), else by a catalog GPU model named
in it (the spec with the least memory, unless the label names a memory size).
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any

import yaml

from srift.domain.accelerator import AcceleratorSpec
from srift.domain.catalog import InstanceType
from srift.domain.structure import Precision
from srift.errors import ConfigurationError, InvalidInput, NotFound

FORMAT = "srift-accelerators/1"


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def parse_specs(document: Any, *, where: str = "accelerators.yaml") -> tuple[AcceleratorSpec, ...]:
    """Validate a srift-accelerators/1 document; ConfigurationError names the entry and field at fault."""

    def fail(detail: str, field: str) -> ConfigurationError:
        return ConfigurationError(f"{where}: {detail}", hint="fix the shipped accelerator specs", field=field)

    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise fail(f"not a {FORMAT} document", "format")
    sources = document.get("sources") or {}
    cc_source = document.get("compute_capability_source")
    if cc_source not in sources:
        raise fail(f"source {cc_source!r} is not listed under sources", "compute_capability_source")
    out: list[AcceleratorSpec] = []
    for i, raw in enumerate(document.get("accelerators") or []):
        at = f"accelerators[{i}]"
        source = raw.get("source")
        if source not in sources:
            raise fail(f"source {source!r} is not listed under sources", f"{at}.source")
        peaks = raw.get("peak_tflops") or {}
        if set(peaks) != {p.value for p in Precision}:
            raise fail("peak_tflops needs fp32, tf32, fp16 and bf16", f"{at}.peak_tflops")
        for key in ("memory_gib", "memory_gbps"):
            if not isinstance(raw.get(key), int | float) or raw[key] <= 0:
                raise fail(f"{key} must be a positive number", f"{at}.{key}")
        if any(not isinstance(v, int | float) or v <= 0 for v in peaks.values()):
            raise fail("every peak must be a positive number", f"{at}.peak_tflops")
        match = raw.get("match") or {}
        capability = str(raw.get("compute_capability") or "")
        if not re.fullmatch(r"[1-9][0-9]?\.[0-9]", capability):
            raise fail("compute_capability must be major.minor, e.g. 8.0", f"{at}.compute_capability")
        out.append(
            AcceleratorSpec(
                name=str(raw["name"]),
                memory_gib=float(raw["memory_gib"]),
                memory_gbps=float(raw["memory_gbps"]),
                memory_type=str(raw.get("memory_type") or ""),
                peak_tflops={Precision(k): float(v) for k, v in peaks.items()},
                source=str(source),
                source_text=str(sources[source]["text"]),
                source_as_of=str(sources[source]["as_of"]),
                names=tuple(str(n) for n in raw.get("names") or ()),
                match_gpu_model=match.get("gpu_model"),
                match_memory_gib=float(match["memory_gib"]) if "memory_gib" in match else None,
                note=str(raw.get("note") or ""),
                compute_capability=capability,
                compute_capability_source=str(sources[cc_source]["text"]),
            )
        )
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise fail("accelerator names must be unique", "accelerators")
    return tuple(out)


@functools.lru_cache(maxsize=1)
def accelerator_specs() -> tuple[AcceleratorSpec, ...]:
    """The shipped accelerator specs (read once)."""
    text = resources.files("srift.catalog").joinpath("specs/accelerators.yaml").read_text()
    return parse_specs(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))


def spec_named(name: str) -> AcceleratorSpec:
    """The spec called `name` (e.g. "A100-SXM4-80GB"); NotFound naming the close known names when there is
    none (a spec's name is exact: "H200" is no spec, "H200-SXM-141GB" is)."""
    for spec in accelerator_specs():
        if spec.name == name:
            return spec
    known = [spec.name for spec in accelerator_specs()]
    close = _close_names(name, known)
    hint = (
        f"name the spec as srift/catalog/specs/accelerators.yaml spells it: {' or '.join(close)}"
        if close
        else f"name one of the specs in srift/catalog/specs/accelerators.yaml: {', '.join(known)}"
    )
    raise NotFound(f"no accelerator spec is named {name!r}", hint=hint)


def _close_names(name: str, known: Sequence[str], *, most: int = 4) -> list[str]:
    """Up to `most` of `known` that `name` may have meant, case and punctuation aside: those it begins
    (a short name such as "H200" for "H200-SXM-141GB", which difflib's ratio rates far), then difflib's close
    matches, each once."""
    by_norm = {_norm(k): k for k in known}
    wanted = _norm(name)
    starts = [k for n, k in by_norm.items() if wanted and n.startswith(wanted)]
    similar = [by_norm[n] for n in difflib.get_close_matches(wanted, list(by_norm), n=most)]
    return list(dict.fromkeys([*starts, *similar]))[:most]


def spec_for_instance(instance: InstanceType) -> AcceleratorSpec | None:
    """The spec of an instance type's GPUs (nearest memory among its GPU model's), None for CPU types."""
    if not instance.gpu_model:
        return None
    return _for_gpu_model(instance.gpu_model, instance.gpu_memory_gib)


@functools.lru_cache(maxsize=256)
def _for_gpu_model(gpu_model: str, memory_gib: float | None) -> AcceleratorSpec | None:
    wanted = _norm(gpu_model)
    found = [s for s in accelerator_specs() if s.match_gpu_model and _norm(s.match_gpu_model) == wanted]
    if not found:
        return None
    if memory_gib is None:
        return min(found, key=lambda s: s.match_memory_gib or s.memory_gib)
    return min(found, key=lambda s: abs((s.match_memory_gib or s.memory_gib) - memory_gib))


@functools.lru_cache(maxsize=1024)
def spec_for_accelerator(label: str) -> AcceleratorSpec | None:
    """The spec a profile's accelerator label names ("Tesla T4", "NVIDIA A100-SXM4-80GB", "A10G"), or None
    (CPU and instance-type labels)."""
    text = _norm(label)
    if not text or text.startswith("cpu"):
        return None
    for spec in accelerator_specs():
        if text == _norm(spec.name) or any(text == _norm(n) for n in spec.names):
            return spec
    memory = re.search(r"(\d+)\s*gb", label.lower())
    for spec in accelerator_specs():
        model = spec.match_gpu_model
        if model and re.search(rf"(^|[^a-z0-9]){re.escape(model.lower())}([^a-z0-9]|$)", label.lower()):
            return _for_gpu_model(model, float(memory.group(1)) if memory else None)
    return None


def require_known_accelerator(label: str, instances: Iterable[InstanceType], *, field: str) -> str:
    """`label` when a profile made on it can be used: some type of `instances` (the catalog) takes it (its
    GPU model, or its name for a CPU type: `InstanceType.matches_accelerator`), or it names an accelerator
    spec (the anchor of scaled estimates). Else InvalidInput naming `field`, with the catalog's GPU models
    and the specs it may have meant: a profile no type matches and no spec names is never used for its
    times, and plans fall back to estimates for every type."""
    known = list(instances)
    if any(i.matches_accelerator(label) for i in known) or spec_for_accelerator(label) is not None:
        return label
    models = sorted({i.gpu_model for i in known if i.gpu_model})
    close = _close_names(label, [*models, *(spec.name for spec in accelerator_specs())])
    guess = f" (did you mean {' or '.join(close)}?)" if close else ""
    raise InvalidInput(
        f"no instance type in the catalog has accelerator {label!r} and no accelerator spec is named "
        f"so{guess}",
        hint=f"name a GPU model of the catalog ({', '.join(models) or 'none'}) or, for a CPU type, the "
        "instance type; `srift catalog list` lists the types and `srift catalog import FILE` adds your own "
        "hardware",
        field=field,
    )
