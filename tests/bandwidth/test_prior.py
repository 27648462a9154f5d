"""The α-β prior: sane shape, more link → more bandwidth, and its calibration on the public p5 run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from srift.bandwidth.nccl_tests import NcclTestsHost, parse_nccl_tests
from srift.bandwidth.prior import EFA, SOURCE, AlphaBetaPrior, calibrate, peak_busbw_gbps
from srift.domain import InstanceType, Interconnect
from srift.errors import InvalidInput

P5 = InstanceType(
    provider="aws",
    name="p5.48xlarge",
    gpu_model="H100",
    gpu_count=8,
    gpu_memory_gib=80,
    vcpus=192,
    memory_gib=2048,
    network_gbps=3200,
    network_burst=False,
    interconnect=Interconnect.NVSWITCH,
    interconnect_gbps=7200,
    efa=True,
)
G4DN = InstanceType(
    provider="aws",
    name="g4dn.xlarge",
    gpu_model="T4",
    gpu_count=1,
    gpu_memory_gib=16,
    vcpus=4,
    memory_gib=16,
    network_gbps=25,
    network_burst=True,
    interconnect=Interconnect.NONE,
    interconnect_gbps=0,
    efa=False,
)
SIZES = [4 << k for k in range(0, 28, 3)]


def test_estimates_are_positive_increasing_in_size_and_named_as_the_prior() -> None:
    est = AlphaBetaPrior().predict(instance=G4DN, world_size=8, nodes=8, buffer_bytes=SIZES)
    busbw = np.array(est.busbw_gbps)
    assert est.source == SOURCE == "prior:alpha-beta" and est.residual_cv > 0
    assert np.all(busbw > 0) and np.all(np.diff(busbw) > 0)
    assert busbw[-1] < 25 * 0.81  # below the rated, efficiency-scaled link


def test_more_network_gbps_gives_more_busbw() -> None:
    prior = AlphaBetaPrior()
    slow = prior.predict(instance=G4DN, world_size=4, nodes=4, buffer_bytes=SIZES).busbw_gbps
    fast_type = dataclasses.replace(G4DN, name="g4dn.fast", network_gbps=100)
    fast = prior.predict(instance=fast_type, world_size=4, nodes=4, buffer_bytes=SIZES).busbw_gbps
    assert all(f >= s for f, s in zip(fast, slow, strict=True))
    assert fast[-1] > 3 * slow[-1]


def test_async_transfers_share_the_link() -> None:
    prior = AlphaBetaPrior()
    one = prior.predict(instance=G4DN, world_size=4, nodes=4, buffer_bytes=[1 << 28]).busbw_gbps[0]
    four = prior.predict(
        instance=G4DN, world_size=4, nodes=4, buffer_bytes=[1 << 28], async_count=4
    ).busbw_gbps[0]
    assert four == pytest.approx(one / 4, rel=0.05)


def test_single_node_uses_the_interconnect_and_one_rank_is_harmless() -> None:
    prior = AlphaBetaPrior()
    assert peak_busbw_gbps(instance=P5, world_size=8, nodes=1) == 7200
    assert peak_busbw_gbps(instance=P5, world_size=16, nodes=2) == pytest.approx(3200 * (15 / 16) / (1 / 2))
    single = prior.predict(instance=G4DN, world_size=1, nodes=1, buffer_bytes=[1024]).busbw_gbps
    assert len(single) == 1 and 0 < single[0] < float("inf")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"world_size": 0, "nodes": 1, "buffer_bytes": [8]}, "world_size"),
        ({"world_size": 4, "nodes": 5, "buffer_bytes": [8]}, "nodes"),
        ({"world_size": 4, "nodes": 2, "buffer_bytes": [8, 0]}, "buffer_bytes"),
        ({"world_size": 4, "nodes": 2, "buffer_bytes": [8], "async_count": 0}, "async_count"),
    ],
)
def test_bad_requests_are_input_errors(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        AlphaBetaPrior().predict(instance=G4DN, **kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_calibration_on_the_p5_reference_reproduces_the_shipped_constants(reference_path: Path) -> None:
    host = NcclTestsHost(provider="aws", instance_type="p5.48xlarge", nodes=2, gpus_per_node=8)
    records = parse_nccl_tests(reference_path.read_text(), host=host)
    sizes = [r.buffer_bytes for r in records]
    measured = np.array([r.busbw_gbps for r in records])
    fit = calibrate(
        sizes, measured, world_size=16, peak_gbps=peak_busbw_gbps(instance=P5, world_size=16, nodes=2)
    )
    for got, shipped in zip(dataclasses.astuple(fit.link), dataclasses.astuple(EFA), strict=True):
        assert got == pytest.approx(shipped, rel=0.02)
    # the stated accuracy of the shipped prior on that run: within 10 % of every size ≥ 64 MiB
    predicted = np.array(
        AlphaBetaPrior().predict(instance=P5, world_size=16, nodes=2, buffer_bytes=sizes).busbw_gbps
    )
    error = np.abs(predicted - measured) / measured
    large = np.array(sizes) >= 64 << 20
    assert error[large].max() <= 0.10
    assert error[np.array(sizes) >= 1 << 30].mean() <= 0.05
    assert error.mean() <= 0.16
    assert predicted[-1] / 8 == pytest.approx(487.09, rel=0.10)
