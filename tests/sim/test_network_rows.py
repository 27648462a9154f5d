"""The bounds' table of network stages over VM counts, asked in one batch (`network_rows`, the prior's
`predict_rings`), gives exactly the numbers of asking n by n: the search prunes with the same bounds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from srift.bandwidth.prior import AlphaBetaPrior
from srift.domain import BandwidthEstimate, InstanceType, Interconnect
from srift.domain.network import Library, NetworkSpec, Transport
from srift.errors import InvalidInput
from srift.sim.bounds import MAX_TABLE_NODES
from srift.sim.network import CAP_PROBE_BYTES, MemoBandwidth, network_rows, network_stage_at

# The table's VM counts that the paths could disagree on: every count up to 64, then each side of every
# power of two (where the tree's depth ⌈log2 n⌉ steps) up to the table's last row, and a few between. A
# batched formula that differs from the n-by-n one in any operation rounds differently at most counts, so
# this set shows it as the whole range 2..MAX_TABLE_NODES did (4,095 stages per type and path, 7.8 s).
_EDGES = {m for k in range(6, MAX_TABLE_NODES.bit_length()) for m in (2**k - 1, 2**k, 2**k + 1)}
NODES = sorted({*range(2, 65), *_EDGES, 100, 333, 1000, 3001} & set(range(2, MAX_TABLE_NODES + 1)))
SIZES = (4, 1000, 1 << 16, 1 << 20, 3 << 20, 1 << 25, 1 << 28)


def _instance(
    name: str, *, gpus: int, network_gbps: float, provider: str = "aws", efa: bool = False
) -> InstanceType:
    return InstanceType(
        provider=provider,
        name=name,
        gpu_model="A100",
        gpu_count=gpus,
        gpu_memory_gib=40.0,
        vcpus=8 * gpus,
        memory_gib=64.0 * gpus,
        network_gbps=network_gbps,
        network_burst=False,
        interconnect=Interconnect.NVSWITCH if gpus == 8 else Interconnect.PCIE,
        interconnect_gbps=600.0,
        efa=efa,
    )


INSTANCES = (
    _instance("one", gpus=1, network_gbps=25.0),
    _instance("four", gpus=4, network_gbps=50.0),
    _instance("eight", gpus=8, network_gbps=400.0, efa=True),
    _instance("gcp8", gpus=8, network_gbps=100.0, provider="gcp"),
)
NETWORKS = (
    NetworkSpec(),
    NetworkSpec(placement_group=True, ena_visible=True),
    NetworkSpec(transport=Transport.EFA),
    NetworkSpec(library=Library.GLOO),
    NetworkSpec(flows_per_peer=4),
    NetworkSpec(measured_gbps={"four": 12.5}),
)


@pytest.mark.parametrize("network", NETWORKS, ids=lambda n: repr(n.key()))
def test_the_priors_batched_rings_equal_its_answers_n_by_n(network: NetworkSpec) -> None:
    prior = AlphaBetaPrior(network=network)
    asked = [*SIZES, CAP_PROBE_BYTES]
    for inst in INSTANCES:
        rows = prior.predict_rings(instance=inst, nodes=NODES, buffer_bytes=asked)
        one_by_one = [prior.predict(instance=inst, world_size=n, nodes=n, buffer_bytes=asked) for n in NODES]
        assert rows.shape == (len(NODES), len(asked))
        assert np.array_equal(rows, np.array([e.busbw_gbps for e in one_by_one]))


def test_the_priors_batched_rings_refuse_a_single_node() -> None:
    with pytest.raises(InvalidInput):
        AlphaBetaPrior().predict_rings(instance=INSTANCES[0], nodes=[1, 2], buffer_bytes=[4])


class _NByN:
    """A bandwidth model without batched answers (a learned model on a type it covers, a wrapper)."""

    def __init__(self, model: AlphaBetaPrior) -> None:
        self.model = model

    def predict(
        self,
        *,
        instance: InstanceType,
        world_size: int,
        nodes: int,
        buffer_bytes: Sequence[int],
        async_count: int = 1,
    ) -> BandwidthEstimate:
        return self.model.predict(
            instance=instance,
            world_size=world_size,
            nodes=nodes,
            buffer_bytes=buffer_bytes,
            async_count=async_count,
        )


def _per_n(inst: InstanceType, model: object) -> tuple[np.ndarray, np.ndarray]:
    plans = [network_stage_at((inst,), n, SIZES, model) for n in NODES]  # type: ignore[arg-type]
    assert all(p is not None for p in plans)
    return (
        np.array([p.stage.rates_bps for p in plans if p is not None]),
        np.array([p.stage.cap_bps for p in plans if p is not None]),
    )


@pytest.mark.parametrize("network", NETWORKS[:3], ids=lambda n: repr(n.key()))
def test_network_rows_equal_the_stages_n_by_n_batched_or_not(network: NetworkSpec) -> None:
    prior = AlphaBetaPrior(network=network)
    for inst in INSTANCES:
        expected = _per_n(inst, prior)
        for model in (prior, MemoBandwidth(prior), _NByN(prior), MemoBandwidth(_NByN(prior))):
            rates, caps = network_rows(inst, NODES, SIZES, model)  # type: ignore[arg-type]
            assert np.array_equal(rates, expected[0]) and np.array_equal(caps, expected[1]), type(model)


class _Broken(_NByN):
    """A model whose answers are sometimes not usable (zero, NaN): both paths replace them the same way."""

    def predict_rings(
        self, *, instance: InstanceType, nodes: Sequence[int], buffer_bytes: Sequence[int]
    ) -> np.ndarray:
        return np.array(
            [
                self.predict(instance=instance, world_size=n, nodes=n, buffer_bytes=buffer_bytes).busbw_gbps
                for n in nodes
            ]
        )

    def predict(
        self,
        *,
        instance: InstanceType,
        world_size: int,
        nodes: int,
        buffer_bytes: Sequence[int],
        async_count: int = 1,
    ) -> BandwidthEstimate:
        est = super().predict(
            instance=instance, world_size=world_size, nodes=nodes, buffer_bytes=buffer_bytes
        )
        values = list(est.busbw_gbps)
        values[world_size % len(values)] = [0.0, float("nan"), -1.0, float("inf")][world_size % 4]
        return BandwidthEstimate(busbw_gbps=tuple(values), source=est.source)


def test_unusable_answers_are_replaced_alike_batched_or_not() -> None:
    broken = _Broken(AlphaBetaPrior())
    inst = INSTANCES[1]
    expected = _per_n(inst, broken)
    rates, caps = network_rows(inst, NODES, SIZES, broken)  # type: ignore[arg-type]
    assert np.array_equal(rates, expected[0]) and np.array_equal(caps, expected[1])
