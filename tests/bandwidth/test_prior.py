"""The α-β prior: sane shape, more link → more bandwidth, and its calibration on the public p5 run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from srift.bandwidth.nccl_tests import NcclTestsHost, parse_nccl_tests
from srift.bandwidth.prior import (
    EFA,
    EFA_RESIDUAL_CV,
    FIT_RUNS,
    NCCL_AWS_FLOWS,
    NCCL_FALLBACK_FLOWS,
    NCCL_MIN_CHANNELS,
    NVSWITCH,
    SOURCE,
    TCP_FLOW_EFFICIENCY,
    TCP_NIC_EFFICIENCY,
    TCP_RESIDUAL_CV,
    Z90,
    AlphaBetaPrior,
    LinkParams,
    PublicRun,
    calibrate_link,
    flows_per_peer,
    node_rate,
    peak_busbw_gbps,
    predict_busbw_gbps,
    public_runs,
    read_runs,
    registered_runs,
)
from srift.domain import InstanceType, Interconnect
from srift.domain.network import Library, NetworkSpec, Transport
from srift.errors import ConfigurationError, InvalidInput
from srift.measurements import Use
from srift.testing.measurements import move_row, registry_with

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
    prior = AlphaBetaPrior(network=NetworkSpec(ena_visible=True))
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
    assert peak_busbw_gbps(instance=P5, world_size=8, nodes=1) == pytest.approx(NVSWITCH.efficiency * 7200)
    # two p5 nodes: the slower of the network (TCP by default: NCCL's one-socket fallback, 1 flow at
    # 5 Gbit/s) and the NVSwitch level
    two = peak_busbw_gbps(instance=P5, world_size=16, nodes=2)
    assert two == pytest.approx(TCP_FLOW_EFFICIENCY * 1 * 5 * (15 / 16) / (1 / 2))
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


def _run(run_id: str) -> PublicRun:
    return next(r for r in public_runs() if r.id == run_id)


P4DE = dataclasses.replace(
    P5, name="p4de.24xlarge", gpu_model="A100", network_gbps=400, interconnect_gbps=2400, memory_gib=1152
)
P5_CATALOG = dataclasses.replace(P5, interconnect_gbps=3600)


@pytest.mark.parametrize(
    ("link", "shipped", "peak_gbps"),
    [("efa", EFA, 400 * (15 / 16) / (1 / 2)), ("nvswitch", NVSWITCH, 3600.0)],
)
def test_calibration_on_the_fit_runs_predicts_what_the_shipped_constants_predict(
    link: str, shipped: LinkParams, peak_gbps: float
) -> None:
    """Refitting the run the constants came from predicts the same bus bandwidths, within the run's noise.

    The fit has a flat direction (step size against tree fraction), so a refit on another numpy/scipy can land
    on other parameters; what the constants are for is the bus bandwidth they predict over the sizes measured.
    The run's own noise is its scatter around the shipped curve (RMS of log(predicted/measured), ~0.11).
    """
    run = _run(FIT_RUNS[link])
    sizes = np.asarray(run.sizes_bytes, dtype=np.float64)
    measured = run.busbw_gbps()
    fit = calibrate_link(link, peak_gbps=peak_gbps)

    def predicted(params: LinkParams) -> np.ndarray:
        scaled = peak_gbps * params.efficiency
        return predict_busbw_gbps(sizes, world_size=run.world_size, peak_gbps=scaled, link=params)

    noise = float(np.sqrt(np.mean(np.log(predicted(shipped) / measured) ** 2)))
    refit_rms = float(np.sqrt(np.mean(np.log(predicted(fit.link) / measured) ** 2)))
    assert 0.0 < noise < 0.25
    assert noise <= refit_rms * 1.01, "the shipped constants are as good a fit as a fresh one"
    gap = np.abs(np.log(predicted(fit.link) / predicted(shipped)))
    assert gap.max() <= noise / 4, f"refit and shipped curves differ by {gap.max():.3f} (noise {noise:.3f})"


def test_the_p5_pair_it_was_not_fitted_on_is_within_15_percent_over_1_mib(reference_path: Path) -> None:
    host = NcclTestsHost(provider="aws", instance_type="p5.48xlarge", nodes=2, gpus_per_node=8)
    records = parse_nccl_tests(reference_path.read_text(), host=host)
    sizes = np.array([r.buffer_bytes for r in records])
    measured = np.array([r.busbw_gbps for r in records])
    assert "p5-2x8-efa" not in FIT_RUNS.values()
    assert np.allclose(sizes, _run("p5-2x8-efa").sizes_bytes)
    predicted = np.array(
        AlphaBetaPrior(network=NetworkSpec(transport=Transport.EFA))
        .predict(instance=P5_CATALOG, world_size=16, nodes=2, buffer_bytes=sizes.tolist())
        .busbw_gbps
    )
    error = np.abs(predicted / measured - 1)
    assert error[sizes >= 1 << 20].mean() <= 0.15
    assert predicted[-1] / 8 == pytest.approx(487.09, rel=0.10)


def test_tcp_rates_follow_flows_placement_groups_and_the_nic() -> None:
    seen = AlphaBetaPrior(network=NetworkSpec(ena_visible=True))
    fat = dataclasses.replace(G4DN, name="g4dn.12xlarge", network_gbps=50, gpu_count=4)
    nccl = node_rate(fat, NetworkSpec(ena_visible=True))
    assert nccl.gbps == pytest.approx(TCP_NIC_EFFICIENCY * 50) and "rated" in nccl.limit
    gloo = node_rate(fat, NetworkSpec(library=Library.GLOO))
    assert gloo.gbps == pytest.approx(TCP_FLOW_EFFICIENCY * 5) and "1 flow" in gloo.limit
    assert gloo.high_gbps is None
    grouped = node_rate(fat, NetworkSpec(library=Library.GLOO, placement_group=True))
    assert grouped.gbps == pytest.approx(2 * gloo.gbps)
    three = node_rate(fat, NetworkSpec(flows_per_peer=3))
    assert three.gbps == pytest.approx(TCP_FLOW_EFFICIENCY * 15)
    measured = node_rate(fat, NetworkSpec(measured_gbps={"g4dn.12xlarge": 4.2}))
    assert measured.gbps == 4.2 and "measured" in measured.limit and measured.high_gbps is None
    efa = node_rate(fat, NetworkSpec(transport=Transport.EFA))
    assert efa.gbps == pytest.approx(EFA.efficiency * 50) and efa.high_gbps is None
    assert flows_per_peer(NetworkSpec(ena_visible=True), provider="aws") == NCCL_AWS_FLOWS == 16
    assert flows_per_peer(NetworkSpec(), provider="aws") == NCCL_FALLBACK_FLOWS == 1
    assert flows_per_peer(NetworkSpec(ena_visible=False), provider="aws") == 1
    assert flows_per_peer(NetworkSpec(), provider="gcp") == 1
    slow = seen.predict(instance=fat, world_size=2, nodes=2, buffer_bytes=[1 << 30]).busbw_gbps[0]
    assert slow < TCP_NIC_EFFICIENCY * 50 and slow > 0.9 * TCP_NIC_EFFICIENCY * 50


def test_nccl_on_aws_defaults_to_its_one_socket_fallback_with_a_band_up_to_the_ena_rate() -> None:
    """Unless the request says NCCL sees the ENA, one flow per peer (5 Gbit/s outside a placement group):
    the deadline-safe end; the band's fast side reaches the ENA-detected (NIC-bound) rate."""
    fat = dataclasses.replace(G4DN, name="g4dn.12xlarge", network_gbps=50, gpu_count=4)
    default = node_rate(fat, NetworkSpec())
    assert default.flows == 1
    assert default.gbps == pytest.approx(TCP_FLOW_EFFICIENCY * 5)
    assert "fallback" in default.limit and "assumed" in default.limit
    assert default.high_gbps == pytest.approx(TCP_NIC_EFFICIENCY * 50)
    hidden = node_rate(fat, NetworkSpec(ena_visible=False))
    assert hidden.gbps == default.gbps and "assumed" not in hidden.limit
    assert hidden.high_gbps == pytest.approx(TCP_FLOW_EFFICIENCY * 5 * NCCL_MIN_CHANNELS)
    given = node_rate(fat, NetworkSpec(flows_per_peer=1))
    assert given.gbps == default.gbps and "assumed" not in given.limit

    sizes = [1 << 16, 1 << 20, 25 << 20, 1 << 29]
    est = AlphaBetaPrior().predict(instance=fat, world_size=8, nodes=2, buffer_bytes=sizes)
    fast = AlphaBetaPrior(network=NetworkSpec(ena_visible=True)).predict(
        instance=fat, world_size=8, nodes=2, buffer_bytes=sizes
    )
    assert all(f > b for f, b in zip(fast.busbw_gbps, est.busbw_gbps, strict=True))
    assert len(est.upside_cvs) == len(sizes) and est.upside_cv == max(est.upside_cvs)
    for b, f, up, cv, f_cv in zip(
        est.busbw_gbps, fast.busbw_gbps, est.upside_cvs, est.residual_cvs, fast.residual_cvs, strict=True
    ):
        assert b * (1 + Z90 * up) >= f * (1 + Z90 * f_cv) * (1 - 1e-9)  # p90 of rate covers ENA's p90
        assert b * (1 - Z90 * cv) < b  # the slow side stays the residual spread
    assert fast.upside_cvs == () and fast.upside_cv == 0.0
    gloo = AlphaBetaPrior(network=NetworkSpec(library=Library.GLOO)).predict(
        instance=fat, world_size=8, nodes=2, buffer_bytes=sizes
    )
    assert gloo.upside_cvs == ()
    one_node = AlphaBetaPrior().predict(instance=fat, world_size=4, nodes=1, buffer_bytes=sizes)
    assert one_node.upside_cvs == ()
    assert "fast end" in AlphaBetaPrior().describe(fat)


def test_socket_transport_on_pcie_gpus_shares_the_host_and_bands_follow_size_classes() -> None:
    pcie = dataclasses.replace(
        G4DN, name="g4dn.12xlarge", gpu_count=4, interconnect=Interconnect.PCIE, interconnect_gbps=126
    )
    assert AlphaBetaPrior().shares_host_pcie(pcie)
    assert not AlphaBetaPrior(network=NetworkSpec(transport=Transport.EFA)).shares_host_pcie(pcie)
    assert not AlphaBetaPrior().shares_host_pcie(P5)
    assert not AlphaBetaPrior().shares_host_pcie(G4DN)
    est = AlphaBetaPrior().predict(instance=pcie, world_size=2, nodes=2, buffer_bytes=[1024, 1 << 26])
    assert est.residual_cvs == (TCP_RESIDUAL_CV["small"], TCP_RESIDUAL_CV["large"])
    assert est.residual_cv == max(est.residual_cvs)
    efa = AlphaBetaPrior(network=NetworkSpec(transport=Transport.EFA)).predict(
        instance=P5, world_size=16, nodes=2, buffer_bytes=[1 << 26]
    )
    assert efa.residual_cvs == (EFA_RESIDUAL_CV["large"],)


def test_every_public_run_names_its_source() -> None:
    runs = public_runs()
    assert {r.id for r in runs} >= {"p5-2x8-efa", "p4de-2x8-efa", "p5-1x8-nvswitch"}
    assert set(FIT_RUNS.values()) <= {r.id for r in runs}
    for r in runs:
        assert r.source["repository"] and r.source["commit"] and len(r.sizes_bytes) == len(r.times_s) > 0


def test_the_public_runs_are_read_through_the_registry_by_use() -> None:
    assert {r.id for r in registered_runs(Use.FIT)} == set(FIT_RUNS.values())
    assert [r.id for r in registered_runs(Use.SPREAD)] == ["p5-2x8-efa"]
    check = registered_runs(Use.CHECK)
    assert check and all(r.id.startswith("tc-") for r in check)
    assert len(public_runs()) == len(check) + len(FIT_RUNS) + 1


@pytest.mark.parametrize(
    ("rows", "says"),
    [
        (["p5-2x8-efa", "p5-2x8-efa-gone"], "listed but not in the file: p5-2x8-efa-gone"),
        ([], "not in the registry"),
    ],
)
def test_the_public_runs_must_be_exactly_the_registrys_rows(rows: list[str], says: str) -> None:
    """A registry whose rows are not the file's runs (one listed that the file lacks, one the registry
    lacks) is refused, by use or not."""

    def edit(document: dict) -> None:
        document["sets"]["p5-2x8-efa"]["rows"] = rows

    edited = registry_with(edit)
    with pytest.raises(ConfigurationError, match=says) as caught:
        read_runs(registry=edited)
    assert caught.value.field == "rows" and "To fix:" in str(caught.value)
    for use in Use:
        with pytest.raises(ConfigurationError, match=says):
            registered_runs(use, registry=edited)


def test_a_link_is_fitted_only_on_a_run_the_registry_lists_as_a_fit_run() -> None:
    demoted = registry_with(
        lambda d: move_row(d, "p4de-2x8-efa", source="p4de-2x8-efa", target="tc-cluster-setting")
    )
    with pytest.raises(ConfigurationError, match="lists as no fit run") as caught:
        calibrate_link("efa", peak_gbps=750.0, registry=demoted)
    assert caught.value.field == "rows" and "To fix:" in str(caught.value)
    fitted = calibrate_link("nvswitch", peak_gbps=3600.0, registry=demoted)
    assert fitted.mape_large < 0.1
