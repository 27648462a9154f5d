"""How plans and predictions render their numbers: one JSON shape for predictions, breakdowns, choices."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Sequence
from typing import Any

from srift.domain import Band, Breakdown, Constraints, ModelProfile, Prediction
from srift.domain.memory import memory_per_gpu


def unused_type_keys(
    field: str,
    keys: Iterable[str],
    names: Sequence[str],
    *,
    missing: str,
    closest: str = "closest",
    located: bool = False,
) -> tuple[str, ...]:
    """Notes for the keys of a request's per-type map (`field`) whose type is not among `names` (sorted),
    each with the names closest to it. Such a key is ignored, and without a note a mistyped type
    (g4dn.12xlarg) would be dropped without a word. A key is a type, or with `located` also
    `provider/region/type` (its last part is the type). A note reads "<field>.<key> ignored: <missing>
    <type> (<closest>: ...)"."""
    notes = []
    for key in keys:
        name = key.rsplit("/", 1)[-1] if located else key
        if name in names:
            continue
        close = difflib.get_close_matches(name, names, n=3)
        notes.append(
            f"{field}.{key} ignored: {missing} {name}"
            + (f" ({closest}: {', '.join(close)})" if close else "")
        )
    return tuple(notes)


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def predicted_document(p: Prediction) -> dict[str, Any]:
    """Iteration time (mean, p10/p50/p90), total time and cost with their p10/p90, the band's terms, and
    egress (and the uninterrupted run when spot interruptions are priced in)."""
    band = p.band or Band()
    return {
        "iteration_s": p.iteration_s,
        "iteration_p10_s": p.iteration_p10_s,
        "iteration_p50_s": p.iteration_p50_s,
        "iteration_p90_s": p.iteration_p90_s,
        "total_time_s": p.total_time_s,
        "total_time_p10_s": p.total_time_quantile_s(0.1),
        "total_time_p90_s": p.total_time_quantile_s(0.9),
        "cost_usd": p.cost_usd,
        "egress_usd": p.egress_usd,
        "uninterrupted_time_s": p.uninterrupted_time_s,
        "uninterrupted_cost_usd": p.uninterrupted_cost_usd,
        "cost_p10_usd": p.cost_quantile_usd(0.1),
        "cost_p90_usd": p.cost_quantile_usd(0.9),
        "band": {
            "sigma": band.sigma,
            "terms": [
                {"source": t.source, "spread": t.spread, "sigma": t.sigma, "measured_by": t.measured_by}
                for t in band.terms
            ],
        },
    }


def probability_document(p: Prediction, c: Constraints) -> dict[str, Any]:
    """P(the run meets the time limit) and P(it stays within the budget), for the limits that are given,
    and the total time and cost at the request's confidence."""
    return {
        "meets_time_limit": None if c.time_limit_s is None else p.p_time_within(c.time_limit_s),
        "within_budget": None if c.budget_usd is None else p.p_cost_within(c.budget_usd),
        "total_time_s_at_confidence": p.total_time_quantile_s(c.confidence),
        "cost_usd_at_confidence": p.cost_quantile_usd(c.confidence),
    }


def breakdown_document(b: Breakdown) -> dict[str, Any]:
    """Where an iteration's time goes (granularity null when there is no communication)."""
    return {
        "forward_s": b.forward_s,
        "backward_s": b.backward_s,
        "compute_s": b.compute_s,
        "straggler_wait_s": b.straggler_wait_s,
        "exposed_intra_s": b.exposed_intra_s,
        "exposed_network_s": b.exposed_network_s,
        "communication_s": b.communication_s,
        "granularity": finite_or_none(b.granularity),
        "data_stall_s": b.data_stall_s,
        "exposed_location_s": b.exposed_location_s,
        "warnings": list(b.warnings),
    }


def choice_document(
    *,
    instance_type: str,
    market: str,
    count: int,
    batch: int,
    gpus: int,
    price_usd_per_hr: float,
    instance_gpus: int | None = None,
    profile: ModelProfile | None = None,
    gpu_memory_gib: float = 0.0,
) -> dict[str, Any]:
    """One fleet choice: `count` VMs of a type and market, `batch` samples per VM over the `gpus` it uses
    (of the type's `instance_gpus`); `compute` says whether its compute times were measured on its
    accelerator or estimated (`estimate:<method>`, with `compute_spread` the estimate's 1-σ error). On a
    GPU type (`gpu_memory_gib`) it shows the memory per GPU at its batch and why the batch is capped
    (`srift.domain.memory.memory_per_gpu`)."""
    return {
        "instance_type": instance_type,
        "market": market,
        "count": count,
        "batch": batch,
        "gpus": gpus,
        "per_gpu_batch": batch / gpus,
        "price_usd_per_hr": price_usd_per_hr,
        "instance_gpus": instance_gpus,
        "compute": profile.source if profile is not None else None,
        "compute_spread": profile.estimate.spread if profile is not None and profile.estimate else None,
        **(
            memory_per_gpu(
                profile,
                gpu_memory_gib=gpu_memory_gib,
                per_gpu_batch=batch / gpus,
                distributed=count * gpus > 1,
            )
            if profile is not None
            else {}
        ),
    }


UNALIGNED_NOTE_SHARE = 0.01
"""An estimated type's step with at least this share in unaligned half-precision products gets a caution
(a display threshold: BERT-base's 2-way QA head, 0.002 %, is not worth one; GPT-2's 50,257-wide head, 26 %,
is). The CLI's plan and the dashboard's Plan page both read it here."""

UNALIGNED_NOTE = (
    "{share} of the step's FLOPs are fp16/bf16 matrix products with a dimension that is not a multiple of 16 "
    "bytes (8 values), off cuBLAS's aligned tensor-core kernels; what they cost is not settled on every GPU: "
    "a roofline estimate prices them like aligned ones, one scaled from another GPU's profile carries that "
    'GPU\'s cost for them (docs/gpu.md, "Unaligned half-precision products"). Padding that dimension (e.g. a '
    "vocabulary to a multiple of 64) removes the doubt; a profile on the GPU measures it"
)
"""The caution's words, one text for the CLI and the dashboard: `{share}` stands for the largest
`unaligned_share` among the plan's estimated types (`estimated.in_plan`), as a whole percentage ("26 %")."""


def estimated_document(candidates: Sequence[Any], choices: Sequence[Any]) -> dict[str, Any]:
    """Which numbers rest on estimated compute: the chosen fleet's estimated types and every candidate's.

    `in_plan` lists the chosen types whose compute is estimated (their times, the plan's totals and
    band rest on it); `candidates` maps every estimated candidate type to its method, accelerator spec,
    the accelerator it was scaled from (if any), its spread, and the share of its step in half-precision
    products off cuBLAS's alignment (`unaligned_share`, null outside autocast or in estimates made before).
    """
    chosen = {c.instance_type for c in choices}
    estimated = {
        c.name: {
            "method": c.profile.estimate.source,
            "accelerator": c.profile.accelerator,
            "based_on": c.profile.estimate.based_on,
            "spread": c.profile.estimate.spread,
            "unaligned_share": c.profile.extra.get("unaligned_share"),
        }
        for c in candidates
        if c.profile.estimate is not None
    }
    return {"in_plan": sorted(chosen & set(estimated)), "candidates": dict(sorted(estimated.items()))}
