"""The bandwidth-model bases: one query per call, answers forwarded unchanged, allreduce standing in."""

from __future__ import annotations

from srift.bandwidth.prior import AlphaBetaPrior
from srift.domain import BandwidthEstimate, InstanceType, Interconnect
from srift.domain.bandwidth import (
    STAND_IN,
    AnswersBusbw,
    BusbwQuery,
    Collective,
    WrappedBandwidth,
)

SIZES = [1 << 10, 1 << 20, 1 << 29]


def _p4d() -> InstanceType:
    return InstanceType(
        provider="aws", name="p4d.24xlarge", gpu_model="A100", gpu_count=8, gpu_memory_gib=40.0, vcpus=96,
        memory_gib=1152.0, network_gbps=400.0, network_burst=False, interconnect=Interconnect.NVSWITCH,
        interconnect_gbps=4800.0, efa=True,
    )  # fmt: skip


class _Recording(AnswersBusbw):
    """Answers 10 Gbit/s per size and keeps the queries it was asked."""

    def __init__(self) -> None:
        self.asked: list[BusbwQuery] = []

    def answer(self, query: BusbwQuery) -> BandwidthEstimate:
        self.asked.append(query)
        return BandwidthEstimate(busbw_gbps=tuple(10.0 for _ in query.buffer_bytes), source="table")


def test_a_call_becomes_one_hashable_query_with_the_calls_keywords() -> None:
    model = _Recording()
    model.predict(instance=_p4d(), world_size=16, nodes=2, buffer_bytes=SIZES, async_count=2)
    model.predict(instance=_p4d(), world_size=16, nodes=2, buffer_bytes=tuple(SIZES), async_count=2)
    first, second = model.asked
    assert first == BusbwQuery(_p4d(), 16, 2, tuple(SIZES), 2)
    assert first == second and len({first, second}) == 1


def test_a_model_of_allreduce_only_answers_other_collectives_with_its_allreduce_standing_in() -> None:
    model = _Recording()
    found = model.predict_collective(
        collective=Collective.ALL_GATHER, instance=_p4d(), world_size=4, nodes=4, buffer_bytes=[1 << 20]
    )
    assert found.busbw_gbps == (10.0,) and found.source == f"table ({STAND_IN} for all_gather)"
    assert model.asked == [BusbwQuery(_p4d(), 4, 4, (1 << 20,), 1)]
    same = model.predict_collective(
        collective=Collective.ALLREDUCE, instance=_p4d(), world_size=4, nodes=4, buffer_bytes=[1 << 20]
    )
    assert same.source == "table"


def test_a_wrapper_answers_as_the_wrapped_model_does() -> None:
    prior = AlphaBetaPrior()
    wrapped = WrappedBandwidth(prior)
    where = {"instance": _p4d(), "world_size": 16, "nodes": 2, "buffer_bytes": SIZES}
    for n in (1, 4):
        assert wrapped.predict(**where, async_count=n) == prior.predict(**where, async_count=n)
    for collective in Collective:
        assert wrapped.predict_collective(collective=collective, **where) == prior.predict_collective(
            collective=collective, **where
        )
        query = BusbwQuery(_p4d(), 16, 2, tuple(SIZES))
        assert query.ask_collective(wrapped, collective) == query.ask_collective(prior, collective)
