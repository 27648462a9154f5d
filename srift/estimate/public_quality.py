"""What held-out predictions of the public GPU table are worth: cost ranking, step-time error, scaling.

Issue #55 asks three things of Srift's leave-one-GPU-out predictions of the public throughput table
(`srift.estimate.public`), each computed here from (row, predicted samples/s) pairs and nothing fitted:

- Plan quality (`rank_offers`): the catalog's instance types whose GPUs and GPU count match rows of the
  table, ranked by cost per sample (price per hour / samples per hour) once at the published throughput and
  once at the predicted one; Spearman's rank correlation of the two costs and the true cost of the type the
  prediction ranks first against the truly cheapest. A type's GPU is the catalog's accelerator spec
  (`srift.catalog.accelerators.spec_for_instance`), so a g5 (A10G) does not match the table's A10 unless
  the caller says so (`as_table_gpu`).
- Step-time error (`step_error`, `large_batch`, `abs_error_quantiles`): predicted step / measured step − 1
  at per-GPU batches of at least a third of the largest the table has for the same GPU, model and precision.
- Single-node scaling (`scaling_cases`): the published efficiency thr_N / (N · thr_1) of one system against
  the predicted one from the same rows' predictions; `implied_allreduce_busbw_gbps` says how slow a link
  would have to be for the published loss to be communication.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import geometric_mean

import numpy as np
from scipy.stats import spearmanr  # type: ignore[import-untyped]

from srift.catalog.accelerators import spec_for_instance
from srift.catalog.document import SnapshotData
from srift.domain import Market
from srift.domain.catalog import Offer
from srift.domain.structure import Precision
from srift.estimate.public import EfficiencyGap, Row

LARGE_BATCH_FRACTION = 1 / 3
"""Issue #55 scores step time at per-GPU batches of at least this share of the largest (its rule)."""


@dataclass(frozen=True, slots=True)
class Predicted:
    """One row of the table with the throughput Srift predicts for it (samples/s of the whole node)."""

    row: Row
    predicted_samples_per_s: float

    @property
    def step_error(self) -> float:
        """Predicted step time / measured step time − 1 (`step_error`)."""
        return step_error(
            measured_samples_per_s=self.row.samples_per_s,
            predicted_samples_per_s=self.predicted_samples_per_s,
        )


def step_error(*, measured_samples_per_s: float, predicted_samples_per_s: float) -> float:
    """Relative error of the predicted step time: at one global batch a step lasts batch / throughput, so
    predicted step / measured step − 1 = measured throughput / predicted throughput − 1."""
    return measured_samples_per_s / predicted_samples_per_s - 1


def large_batch(items: Sequence[Predicted], *, fraction: float = LARGE_BATCH_FRACTION) -> list[Predicted]:
    """The items whose per-GPU batch is at least `fraction` of the largest per-GPU batch the table has for
    the same GPU model, model and precision (over every GPU count in `items`)."""
    largest: dict[tuple[str, str, Precision], int] = defaultdict(int)
    for p in items:
        key = (p.row.gpu, p.row.model, p.row.precision)
        largest[key] = max(largest[key], p.row.per_gpu_batch)
    return [
        p
        for p in items
        if p.row.per_gpu_batch >= fraction * largest[(p.row.gpu, p.row.model, p.row.precision)]
    ]


def abs_error_quantiles(errors: Iterable[float]) -> tuple[float, float]:
    """(median, 90th percentile) of |error| (numpy's linear interpolation between order statistics); nan
    for no errors."""
    values = np.abs(np.asarray(list(errors), dtype=float))
    if values.size == 0:
        return math.nan, math.nan
    return float(np.median(values)), float(np.percentile(values, 90))


# --- single-node scaling -------------------------------------------------------------------------------

_GPU_COUNT = re.compile(r"\b\d+\s*x\s*", re.IGNORECASE)


def system_of(row: Row) -> str:
    """The row's system without its GPU count ("Dell 8x H100 80GB SXM5" -> "Dell H100 80GB SXM5",
    "LambdaCloud 4xV100 16GB" -> "LambdaCloud V100 16GB"): rows of one vendor's machine pair up by it."""
    return " ".join(_GPU_COUNT.sub("", row.row).split())


@dataclass(frozen=True, slots=True)
class ScalingCase(EfficiencyGap):
    """One system's N-GPU row against its 1-GPU row: the published and predicted efficiency thr_N/(N·thr_1);
    the two rows by their registry ids."""

    system: str
    gpu: str
    model: str
    precision: Precision
    gpus: int
    per_gpu_batch_one: int
    per_gpu_batch_n: int
    published_efficiency: float
    predicted_efficiency: float
    one_row_id: str
    row_id: str

    @property
    def same_per_gpu_batch(self) -> bool:
        return self.per_gpu_batch_one == self.per_gpu_batch_n


def scaling_cases(items: Sequence[Predicted]) -> list[ScalingCase]:
    """Every (system, model, precision) with a 1-GPU row and an N-GPU row (N > 1) of the same system
    (`system_of`), one case per N; N-GPU rows whose system has no 1-GPU row are left out."""
    single: dict[tuple[str, str, Precision], Predicted] = {}
    for p in items:
        if p.row.gpus == 1:
            single[(system_of(p.row), p.row.model, p.row.precision)] = p
    out = []
    for p in items:
        one = single.get((system_of(p.row), p.row.model, p.row.precision))
        if p.row.gpus == 1 or one is None:
            continue
        n = p.row.gpus
        out.append(
            ScalingCase(
                system=system_of(p.row),
                gpu=p.row.gpu,
                model=p.row.model,
                precision=p.row.precision,
                gpus=n,
                per_gpu_batch_one=one.row.per_gpu_batch,
                per_gpu_batch_n=p.row.per_gpu_batch,
                published_efficiency=p.row.samples_per_s / (n * one.row.samples_per_s),
                predicted_efficiency=p.predicted_samples_per_s / (n * one.predicted_samples_per_s),
                one_row_id=one.row.id,
                row_id=p.row.id,
            )
        )
    return sorted(out, key=lambda s: (s.gpu, s.system, s.model, s.precision.value, s.gpus))


def step_growth_s(*, one: Row, n: Row) -> float:
    """t_N − t_1: how much longer the N-GPU row's step is than the 1-GPU row's (t = global batch /
    throughput; at the same per-GPU batch, the time data parallelism added)."""
    return n.global_batch / n.samples_per_s - one.global_batch / one.samples_per_s


def implied_allreduce_busbw_gbps(*, gradient_bytes: float, gpus: int, grown_s: float) -> float:
    """The all-reduce bus bandwidth (GB/s, nccl-tests' definition: busbw = S · 2(N−1)/N / t; NVIDIA/nccl-tests
    doc/PERFORMANCE.md) at which one all-reduce of `gradient_bytes` over `gpus` ranks lasts `grown_s`.

    With `grown_s` the published step's growth from 1 to N GPUs, this is the fastest link for which that
    growth could be gradient traffic: all of it exposed (none hidden behind the backward pass, which would
    ask a slower link still). A link measured or rated far above it cannot explain the loss by its speed.
    nan when the step did not grow."""
    if grown_s <= 0 or gpus < 2:
        return math.nan
    return gradient_bytes * 2 * (gpus - 1) / gpus / grown_s / 1e9


# --- plan quality ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ranked:
    """One offer with the table's rows for its GPU model and count: the published and predicted node
    throughput (geometric means over the rows of several vendors' systems) and both costs per sample."""

    offer: Offer
    table_gpu: str
    rows: int
    measured_samples_per_s: float
    predicted_samples_per_s: float

    @property
    def measured_usd_per_sample(self) -> float:
        return self.offer.price_usd_per_s / self.measured_samples_per_s

    @property
    def predicted_usd_per_sample(self) -> float:
        return self.offer.price_usd_per_s / self.predicted_samples_per_s


@dataclass(frozen=True, slots=True)
class Ranking:
    """The offers of one model and precision ranked both ways (module docstring)."""

    model: str
    precision: Precision
    entries: tuple[Ranked, ...]

    @property
    def spearman(self) -> float:
        """Spearman's ρ between the published and predicted cost per sample; nan under 2 entries or when
        either side is constant."""
        if len(self.entries) < 2:
            return math.nan
        measured = [e.measured_usd_per_sample for e in self.entries]
        predicted = [e.predicted_usd_per_sample for e in self.entries]
        if len(set(measured)) < 2 or len(set(predicted)) < 2:
            return math.nan
        return float(spearmanr(measured, predicted).statistic)

    @property
    def true_best(self) -> Ranked:
        return min(self.entries, key=lambda e: (e.measured_usd_per_sample, e.offer.instance.name))

    @property
    def predicted_best(self) -> Ranked:
        return min(self.entries, key=lambda e: (e.predicted_usd_per_sample, e.offer.instance.name))

    @property
    def same_gpu_spread(self) -> float:
        """The largest relative spread (max / min − 1) of predicted cost per sample among the entries of one
        table GPU model (sizes of one family, e.g. p3.2xlarge/8xlarge/16xlarge): how close to a tie the
        prediction's order of those sizes is; 0 without two entries of one GPU model."""
        spreads = [0.0]
        for gpu in {e.table_gpu for e in self.entries}:
            costs = [e.predicted_usd_per_sample for e in self.entries if e.table_gpu == gpu]
            spreads.append(max(costs) / min(costs) - 1)
        return max(spreads)

    @property
    def first_to_best(self) -> float:
        """The published cost per sample of the type the prediction ranks first / the lowest published
        cost per sample (1.0: the prediction picks the truly cheapest)."""
        return self.predicted_best.measured_usd_per_sample / self.true_best.measured_usd_per_sample


def rank_offers(
    items: Sequence[Predicted],
    offers: Sequence[Offer],
    *,
    as_table_gpu: Mapping[str, str] | None = None,
) -> list[Ranking]:
    """For each (model, precision) of `items`: every offer whose GPU spec (`spec_for_instance`, renamed by
    `as_table_gpu` where it names it) and GPU count match rows of that model and precision, ranked
    (`Ranking`). Offers without a GPU spec or without matching rows are left out of that ranking."""
    alias = dict(as_table_gpu or {})
    rows_of: dict[tuple[str, int, str, Precision], list[Predicted]] = defaultdict(list)
    for p in items:
        rows_of[(p.row.gpu, p.row.gpus, p.row.model, p.row.precision)].append(p)
    out = []
    for model, precision in sorted({(p.row.model, p.row.precision) for p in items}, key=str):
        entries = []
        for offer in offers:
            spec = spec_for_instance(offer.instance)
            if spec is None:
                continue
            gpu = alias.get(spec.name, spec.name)
            matched = rows_of.get((gpu, offer.instance.gpu_count, model, precision), [])
            if not matched:
                continue
            entries.append(
                Ranked(
                    offer=offer,
                    table_gpu=gpu,
                    rows=len(matched),
                    measured_samples_per_s=geometric_mean([p.row.samples_per_s for p in matched]),
                    predicted_samples_per_s=geometric_mean([p.predicted_samples_per_s for p in matched]),
                )
            )
        if entries:
            entries.sort(key=lambda e: (e.measured_usd_per_sample, e.offer.instance.name))
            out.append(Ranking(model=model, precision=precision, entries=tuple(entries)))
    return out


def offers_in(snapshot: SnapshotData, *, region: str, market: Market) -> list[Offer]:
    """The snapshot's GPU instance types priced in `region` on `market`, each with its price's source."""
    types = {t.instance.name: t.instance for t in snapshot.types}
    return [
        Offer(
            instance=types[p.instance_type],
            region=p.region,
            market=p.market,
            price_usd_per_hr=p.price_usd_per_hr,
            source=p.source,
            as_of=p.as_of,
        )
        for p in snapshot.prices
        if p.region == region and p.market == market and types[p.instance_type].gpu_count > 0
    ]
