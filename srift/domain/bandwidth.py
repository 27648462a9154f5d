"""The contract between bandwidth models (learned or prior) and the simulator."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

from srift.domain.catalog import InstanceType


class Collective(StrEnum):
    """A collective operation whose bus bandwidth a model may answer for.

    Bus bandwidth as nccl-tests defines it (NVIDIA/nccl-tests doc/PERFORMANCE.md): busbw = algbw · factor,
    algbw = S / t for a buffer of S bytes (the whole, gathered or reduced buffer), with factor 2(n−1)/n for
    allreduce and (n−1)/n for all-gather and reduce-scatter, so that each collective's busbw is comparable
    with the links' peak."""

    ALLREDUCE = "allreduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"

    def bus_factor(self, world_size: int) -> float:
        """busbw / algbw for `world_size` ranks (0 for one rank: nothing moves)."""
        n = world_size
        if n < 2:
            return 0.0
        return (2.0 if self is Collective.ALLREDUCE else 1.0) * (n - 1) / n


@dataclass(frozen=True, slots=True)
class BandwidthEstimate:
    """Predicted allreduce bus bandwidth for a batch of buffer sizes.

    `busbw_gbps` is bus bandwidth in gigabits/s (nccl-tests prints gigabytes/s: multiply by 8), one value
    per requested size. `source` names the model version (e.g. "xgb:2026-11-22T10:00:00") or
    "prior:alpha-beta".
    `residual_cv` is the model's relative error spread (std of (pred-actual)/actual), used for Monte Carlo;
    `residual_cvs`, when given, is that spread per requested size (the model's out-of-sample spread in the
    size's class, which prediction bands use), and `residual_cv` is then their largest.
    `upside_cvs` (and their largest, `upside_cv`), when given, describe the fast side only: the bandwidth's
    p90 may reach 1 + 1.2816·upside_cv times the estimate. The prior sets them when it assumed the slow one
    of two public defaults (NCCL's one-socket fallback) and the other (NCCL seeing the AWS ENA) may hold;
    prediction bands, which guard limits on the slow side, do not use them.
    """

    busbw_gbps: tuple[float, ...]
    source: str
    residual_cv: float = 0.0
    residual_cvs: tuple[float, ...] = ()
    upside_cv: float = 0.0
    upside_cvs: tuple[float, ...] = ()

    def residual_at(self, i: int) -> float:
        """The error spread of the i-th requested size."""
        return self.residual_cvs[i] if i < len(self.residual_cvs) else self.residual_cv


class BusBandwidthModel(Protocol):
    """Anything that predicts allreduce bus bandwidth across `world_size` ranks of one instance type.

    A model may also answer other collectives with `predict_collective` (the keywords of `predict` less
    `async_count`, plus `collective`); `BusbwQuery.ask_collective` asks it when it does."""

    def predict(
        self,
        *,
        instance: InstanceType,
        world_size: int,
        nodes: int,
        buffer_bytes: Sequence[int],
        async_count: int = 1,
    ) -> BandwidthEstimate: ...


STAND_IN = "allreduce busbw standing in"


def standing_in(estimate: BandwidthEstimate, collective: Collective) -> BandwidthEstimate:
    """An allreduce answer as `collective`'s: the same bus bandwidths, the source saying it stands in
    (srift.bandwidth.collectives says why the bus bandwidths agree); allreduce's own answer unchanged."""
    if collective is Collective.ALLREDUCE:
        return estimate
    return replace(estimate, source=f"{estimate.source} ({STAND_IN} for {collective.value})")


@dataclass(frozen=True, slots=True)
class BusbwQuery:
    """One question to a bandwidth model: bus bandwidth per size in `buffer_bytes` (bytes) across
    `world_size` ranks on `nodes` VMs of `instance`, with `async_count` collectives in flight.

    Hashable, so a model may remember its answers by query."""

    instance: InstanceType
    world_size: int
    nodes: int
    buffer_bytes: tuple[int, ...]
    async_count: int = 1

    def ask(self, model: BusBandwidthModel) -> BandwidthEstimate:
        """`model`'s allreduce answer."""
        return model.predict(
            instance=self.instance,
            world_size=self.world_size,
            nodes=self.nodes,
            buffer_bytes=self.buffer_bytes,
            async_count=self.async_count,
        )

    def ask_collective(self, model: BusBandwidthModel, collective: Collective) -> BandwidthEstimate:
        """`model`'s answer for `collective`: its own (`predict_collective`) when it has one, else its
        allreduce answer standing in."""
        own = getattr(model, "predict_collective", None)
        if callable(own):
            found: BandwidthEstimate = own(
                collective=collective,
                instance=self.instance,
                world_size=self.world_size,
                nodes=self.nodes,
                buffer_bytes=self.buffer_bytes,
            )
            return found
        return standing_in(self.ask(model), collective)


class AnswersBusbw(ABC):
    """Base of a bandwidth model: BusBandwidthModel's `predict` and `predict_collective`, each turned into
    one `BusbwQuery` for the model's `answer` (allreduce) and `answer_collective`.

    `answer_collective` defaults to the allreduce answer standing in (`standing_in`)."""

    def predict(
        self,
        *,
        instance: InstanceType,
        world_size: int,
        nodes: int,
        buffer_bytes: Sequence[int],
        async_count: int = 1,
    ) -> BandwidthEstimate:
        """Allreduce bus bandwidth (Gbit/s) per size: `answer`'s."""
        query = BusbwQuery(instance, world_size, nodes, tuple(buffer_bytes), async_count)
        return self.answer(query)

    def predict_collective(
        self,
        *,
        collective: Collective,
        instance: InstanceType,
        world_size: int,
        nodes: int,
        buffer_bytes: Sequence[int],
    ) -> BandwidthEstimate:
        """Bus bandwidth (Gbit/s) per size of `collective`: `answer_collective`'s."""
        query = BusbwQuery(instance, world_size, nodes, tuple(buffer_bytes))
        return self.answer_collective(collective, query)

    @abstractmethod
    def answer(self, query: BusbwQuery) -> BandwidthEstimate:
        """The model's allreduce answer to `query`."""

    def answer_collective(self, collective: Collective, query: BusbwQuery) -> BandwidthEstimate:
        """The model's answer for `collective`: by default its allreduce answer standing in."""
        return standing_in(self.answer(query), collective)


class WrappedBandwidth(AnswersBusbw):
    """A bandwidth model around another, `model`, answering as it does; a subclass changes or remembers
    the answers by overriding `answer` / `answer_collective` and calling these."""

    def __init__(self, model: BusBandwidthModel) -> None:
        self.model = model

    def answer(self, query: BusbwQuery) -> BandwidthEstimate:
        return query.ask(self.model)

    def answer_collective(self, collective: Collective, query: BusbwQuery) -> BandwidthEstimate:
        return query.ask_collective(self.model, collective)
