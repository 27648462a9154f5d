"""All-gather and reduce-scatter: nccl-tests' bus bandwidth for each, their logs imported, the prior's ring,
and allreduce standing in for models that know only allreduce."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pytest
from sqlalchemy.orm import Session

from srift.bandwidth.collectives import STAND_IN, MeasuredCollectives, collective_time_s
from srift.bandwidth.nccl_tests import NcclTestsHost, parse_nccl_tests
from srift.bandwidth.prior import AlphaBetaPrior, LinkParams, ring_collective_gbps
from srift.bandwidth.records import ProbeRecord, SampleQuery, busbw_gbps
from srift.bandwidth.samples import load_samples
from srift.db.session import session_factory
from srift.domain import BandwidthEstimate, InstanceType
from srift.domain.bandwidth import BusbwQuery, Collective
from srift.errors import InvalidInput

from .helpers import run_cli

HOST = NcclTestsHost(provider="aws", instance_type="p4d.24xlarge", nodes=2, gpus_per_node=1)
ALL_GATHER = "\n".join(
    [
        "# Collective test starting: all_gather_perf",
        "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time",
        "     1048576        131072     float    none      -1   100.00   10.49    5.24      0   101.0",
        "     2097152        262144     float    none      -1   150.00   13.98    6.99      0   151.0",
    ]
)
"""Two ranks: algbw = size / time (1,048,576 B / 100 µs = 10.49 GB/s), busbw = algbw · (n − 1)/n = 5.24."""


def test_bus_factors_are_nccl_tests_definitions() -> None:
    assert Collective.ALLREDUCE.bus_factor(4) == pytest.approx(1.5)
    assert Collective.ALL_GATHER.bus_factor(4) == pytest.approx(0.75)
    assert Collective.REDUCE_SCATTER.bus_factor(1) == 0.0
    # 1 MiB at 100 µs over 2 ranks: 83.89 Gbit/s of algorithm bandwidth, half of it bus bandwidth.
    assert busbw_gbps(buffer_bytes=1 << 20, world_size=2, time_s=1e-4, collective="all_gather") == (
        pytest.approx(41.943, abs=1e-3)
    )
    assert collective_time_s(
        collective=Collective.REDUCE_SCATTER, buffer_bytes=1 << 20, world_size=2, busbw_gbps=41.943
    ) == pytest.approx(1e-4, rel=1e-4)


def test_an_all_gather_perf_log_is_read_with_its_own_bus_factor() -> None:
    records = parse_nccl_tests(ALL_GATHER, host=HOST)
    assert [(r.collective, r.buffer_bytes) for r in records] == [
        ("all_gather", 1 << 20),
        ("all_gather", 2 << 20),
    ]
    assert records[0].busbw_gbps == pytest.approx(5.24 * 8, rel=2e-3)
    allreduce_twin = parse_nccl_tests(ALL_GATHER.replace("all_gather_perf", "all_reduce_perf").replace(
        "5.24", "10.49").replace("6.99", "13.98"), host=HOST)  # fmt: skip
    assert records[0].fingerprint() != allreduce_twin[0].fingerprint()
    with pytest.raises(InvalidInput) as contradicted:
        parse_nccl_tests(ALL_GATHER, host=HOST, collective=Collective.REDUCE_SCATTER)
    assert contradicted.value.field == "collective"
    headless = ALL_GATHER.split("\n", 1)[1]
    assert parse_nccl_tests(headless, host=HOST, collective=Collective.ALL_GATHER)[1].busbw_gbps == (
        pytest.approx(6.99 * 8, rel=2e-3)
    )
    with pytest.raises(InvalidInput) as as_allreduce:
        parse_nccl_tests(headless, host=HOST)
    assert "does not match size and time" in as_allreduce.value.detail


def test_imported_collectives_are_stored_but_models_train_on_allreduce(
    cli_db: str, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "ag.txt"
    path.write_text(ALL_GATHER)
    args = ("probe", "import", "--format", "nccl-tests", "--instance-type", "p4d.24xlarge", "--nodes", "2")
    code, out, err = run_cli(capsys, *args, "--gpus-per-node", "1", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["stored"] == 2
    code, _, err = run_cli(capsys, *args, "--gpus-per-node", "1", "--collective", "allgather", str(path))
    assert code == 2 and "unknown collective" in err
    with session_factory(cli_db)() as session:
        assert isinstance(session, Session)
        assert load_samples(session=session) == []
        every = load_samples(session=session, query=SampleQuery(collective=None))
        assert [r.collective for r in every] == ["all_gather", "all_gather"]


def test_the_priors_ring_by_hand() -> None:
    """1 MiB over 4 ranks at 100 Gbit/s, α0 = 10 µs, α = 5 µs a hop: the bus carries 8·2^20·3/4 =
    6,291,456 bits in 62.91 µs, after 10 + 3 × 5 µs: 87.91 µs, 71.57 Gbit/s."""
    link = LinkParams(base_s=10e-6, hop_s=5e-6, efficiency=1.0, tree_fraction=1.0)
    got = ring_collective_gbps(
        __import__("numpy").asarray([1 << 20]), world_size=4, peak_gbps=100.0, link=link
    )
    assert float(got[0]) == pytest.approx(6291456 / 87.91456e-6 / 1e9, rel=1e-6)


def _p4d() -> InstanceType:
    from srift.domain import Interconnect

    return InstanceType(
        provider="aws", name="p4d.24xlarge", gpu_model="A100", gpu_count=8, gpu_memory_gib=40.0, vcpus=96,
        memory_gib=1152.0, network_gbps=400.0, network_burst=False, interconnect=Interconnect.NVSWITCH,
        interconnect_gbps=4800.0, efa=True,
    )  # fmt: skip


def test_the_prior_answers_every_collective_and_names_it() -> None:
    prior = AlphaBetaPrior()
    sizes = [1 << 10, 1 << 20, 1 << 29]
    ag = prior.predict_collective(
        collective=Collective.ALL_GATHER, instance=_p4d(), world_size=16, nodes=2, buffer_bytes=sizes
    )
    ar = prior.predict(instance=_p4d(), world_size=16, nodes=2, buffer_bytes=sizes)
    assert ag.source == "prior:alpha-beta:all_gather"
    # the same links' ceiling at the bandwidth-bound end; for 1 KiB over 16 ranks allreduce takes its
    # tree (2·log2 16 = 8 steps), the all-gather's ring 15: slower
    assert ag.busbw_gbps[-1] == pytest.approx(ar.busbw_gbps[-1], rel=0.05)
    assert ag.busbw_gbps[0] < ar.busbw_gbps[0]
    assert (
        prior.predict_collective(
            collective=Collective.ALLREDUCE, instance=_p4d(), world_size=16, nodes=2, buffer_bytes=sizes
        )
        == ar
    )


class _AllreduceOnly:
    def predict(
        self, *, instance: InstanceType, world_size: int, nodes: int, buffer_bytes: Sequence[int],
        async_count: int = 1,
    ) -> BandwidthEstimate:  # fmt: skip
        return BandwidthEstimate(busbw_gbps=tuple(10.0 for _ in buffer_bytes), source="table")


def test_a_model_of_allreduce_only_stands_in_and_says_so() -> None:
    query = BusbwQuery(_p4d(), world_size=4, nodes=4, buffer_bytes=(1 << 20,))
    found = query.ask_collective(_AllreduceOnly(), Collective.REDUCE_SCATTER)
    assert found.busbw_gbps == (10.0,) and STAND_IN in found.source and "reduce_scatter" in found.source


def _sample(collective: str, size: int, busbw: float) -> ProbeRecord:
    time_s = size * 8 * Collective(collective).bus_factor(2) / (busbw * 1e9)
    return ProbeRecord(
        run_id="r", provider="aws", instance_type="p4d.24xlarge", backend="gloo", buffer_bytes=size,
        world_size=2, nodes=2, ranks_per_node=1, time_s=time_s, algbw_gbps=0.0, busbw_gbps=busbw,
        collective=collective,
    )  # fmt: skip


def test_measured_collectives_stand_where_they_were_measured() -> None:
    """All-gather measured at 1 KiB (1 Gbit/s, twice: 1 and 3, median 2) and 1 MiB (8 Gbit/s): at 32 KiB,
    halfway in log size, 5 Gbit/s; beyond the ends, the end's; other rings and allreduce: the model's."""
    records = [
        _sample("all_gather", 1 << 10, 1.0),
        _sample("all_gather", 1 << 10, 3.0),
        _sample("all_gather", 1 << 20, 8.0),
        _sample("allreduce", 1 << 20, 99.0),
    ]
    model = MeasuredCollectives(_AllreduceOnly(), records)
    found = model.predict_collective(
        collective=Collective.ALL_GATHER, instance=_p4d(), world_size=2, nodes=2,
        buffer_bytes=[1 << 5, 1 << 15, 1 << 30],
    )  # fmt: skip
    assert found.busbw_gbps == pytest.approx((2.0, 5.0, 8.0))
    # the samples' spread is the answer's error: at 1 KiB std(ln 1, ln 3) = ln 3 / 2, one sample at 1 MiB
    spread = math.log(3) / 2
    assert found.residual_cvs == pytest.approx((spread, spread / 2, 0.0))
    assert found.source == "measured:all_gather@p4d.24xlarge×2"
    other = model.predict_collective(
        collective=Collective.ALL_GATHER, instance=_p4d(), world_size=4, nodes=4, buffer_bytes=[1 << 20]
    )
    assert other.busbw_gbps == (10.0,) and STAND_IN in other.source
    assert model.predict(instance=_p4d(), world_size=2, nodes=2, buffer_bytes=[1 << 20]).busbw_gbps == (10.0,)
