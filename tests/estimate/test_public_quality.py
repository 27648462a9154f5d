"""Cost ranking, step-time error quantiles and scaling efficiency of held-out predictions of the public table,
on hand-made rows whose answers are worked out by hand, and the catalog offers they are ranked over."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from srift.catalog.document import load_catalog_file
from srift.domain import Market
from srift.domain.catalog import Offer
from srift.domain.structure import Precision
from srift.estimate.public import Row
from srift.estimate.public_quality import (
    Predicted,
    abs_error_quantiles,
    implied_allreduce_busbw_gbps,
    large_batch,
    offers_in,
    rank_offers,
    scaling_cases,
    step_error,
    step_growth_s,
    system_of,
)

AWS = Path(__file__).resolve().parents[2] / "srift" / "catalog" / "data" / "aws.yaml"


def row(
    name: str,
    *,
    gpu: str = "V100-SXM2-16GB",
    gpus: int = 1,
    model: str = "resnet50",
    precision: Precision = Precision.TF32,
    samples_per_s: float = 100.0,
    per_gpu_batch: int = 128,
) -> Row:
    return Row(
        row=name,
        gpu=gpu,
        gpus=gpus,
        model=model,
        precision=precision,
        samples_per_s=samples_per_s,
        global_batch=per_gpu_batch * gpus,
        batch_from="table",
        interconnect="none" if gpus == 1 else "nvlink",
        interconnect_gbps=0.0 if gpus == 1 else 1200.0,
    )


@pytest.fixture(scope="module")
def aws_types() -> dict[str, Offer]:
    """The shipped catalog's us-east-1 on-demand GPU offers by type name."""
    snap = load_catalog_file(AWS)
    return {o.instance.name: o for o in offers_in(snap, region="us-east-1", market=Market.ON_DEMAND)}


def test_step_error_is_the_predicted_step_over_the_measured_one() -> None:
    # 100 samples/s measured, 80 predicted: the predicted step is 100/80 = 1.25 times the measured one.
    assert step_error(measured_samples_per_s=100.0, predicted_samples_per_s=80.0) == pytest.approx(0.25)
    assert Predicted(row("a", samples_per_s=100.0), 125.0).step_error == pytest.approx(-0.2)


def test_large_batch_keeps_a_third_of_the_largest_per_gpu_batch_per_gpu_model_and_precision() -> None:
    items = [
        Predicted(row("big", per_gpu_batch=300), 1.0),
        Predicted(row("third", gpus=2, per_gpu_batch=100), 1.0),
        Predicted(row("small", gpus=4, per_gpu_batch=99), 1.0),
        # Another precision has its own largest batch: 99 is all of it.
        Predicted(row("fp16", precision=Precision.FP16, per_gpu_batch=99), 1.0),
    ]
    assert [p.row.row for p in large_batch(items)] == ["big", "third", "fp16"]


def test_abs_error_quantiles_are_the_median_and_linear_90th_percentile_of_magnitudes() -> None:
    median, p90 = abs_error_quantiles([0.1, -0.2, 0.3, -0.4, 0.5])
    assert median == pytest.approx(0.3)
    # Sorted magnitudes 0.1 … 0.5; position 0.9 × 4 = 3.6 lies 60 % of the way from 0.4 to 0.5.
    assert p90 == pytest.approx(0.46)
    assert all(math.isnan(x) for x in abs_error_quantiles([]))


def test_system_of_drops_the_gpu_count_however_it_is_written() -> None:
    assert system_of(row("Dell 8x H100 80GB SXM5")) == "Dell H100 80GB SXM5"
    assert system_of(row("LambdaCloud 4xV100 16GB")) == "LambdaCloud V100 16GB"
    assert system_of(row("H100 80GB SXM5")) == "H100 80GB SXM5"


def test_scaling_pairs_each_n_gpu_row_with_its_systems_one_gpu_row() -> None:
    items = [
        Predicted(row("Box V100"), 110.0),
        Predicted(row("Box 8x V100", gpus=8, samples_per_s=720.0), 880.0),
        Predicted(row("Box 2x V100", gpus=2, samples_per_s=200.0), 209.0),
        # No 1-GPU row of this system: left out.
        Predicted(row("Other 8x V100", gpus=8, samples_per_s=700.0), 800.0),
        # Same system, other precision, no 1-GPU row in that precision: left out.
        Predicted(row("Box 4x V100", gpus=4, precision=Precision.FP16), 400.0),
    ]
    cases = scaling_cases(items)
    assert [(c.system, c.gpus) for c in cases] == [("Box V100", 2), ("Box V100", 8)]
    eight = cases[1]
    assert eight.published_efficiency == pytest.approx(720 / (8 * 100))
    assert eight.predicted_efficiency == pytest.approx(880 / (8 * 110))
    assert eight.difference_points == pytest.approx(10.0)
    assert (eight.one_row_id, eight.row_id) == ("Box V100/resnet50/fp32", "Box 8x V100/resnet50/fp32")
    assert eight.same_per_gpu_batch
    assert cases[0].difference_points == pytest.approx(100 * (209 / 220 - 1.0))


def test_offers_are_the_catalogs_gpu_types_at_their_on_demand_price(aws_types: dict[str, Offer]) -> None:
    assert aws_types["p3.2xlarge"].price_usd_per_hr == pytest.approx(3.06)
    assert "SkyPilot" in aws_types["p3.2xlarge"].source
    assert all(o.instance.gpu_count > 0 for o in aws_types.values())
    assert "c5.xlarge" not in aws_types


def test_ranking_matches_gpu_spec_and_count_and_scores_both_orders(aws_types: dict[str, Offer]) -> None:
    offers = [aws_types[n] for n in ("p3.2xlarge", "p3.16xlarge", "p4de.24xlarge", "g5.xlarge", "p3.8xlarge")]
    items = [
        Predicted(row("V1", samples_per_s=400.0), 300.0),
        Predicted(row("V8", gpus=8, samples_per_s=3000.0), 2900.0),
        # Two systems of one GPU model and count: geometric mean of 4000 and 9000 = 6000 (predicted 2000
        # and 8000 -> 4000).
        Predicted(row("A8", gpu="A100-SXM4-80GB", gpus=8, samples_per_s=4000.0), 2000.0),
        Predicted(row("B A8", gpu="A100-SXM4-80GB", gpus=8, samples_per_s=9000.0), 8000.0),
        Predicted(row("A10", gpu="A10", samples_per_s=300.0), 300.0),
    ]
    (ranking,) = rank_offers(items, offers)
    names = {e.offer.instance.name: e for e in ranking.entries}
    # g5 has the A10G, not the table's A10; no 4-GPU V100 row for p3.8xlarge.
    assert set(names) == {"p3.2xlarge", "p3.16xlarge", "p4de.24xlarge"}
    a100 = names["p4de.24xlarge"]
    assert (a100.rows, a100.measured_samples_per_s, a100.predicted_samples_per_s) == (
        2,
        pytest.approx(6000.0),
        pytest.approx(4000.0),
    )
    assert a100.measured_usd_per_sample == pytest.approx(40.96575 / (6000.0 * 3600))
    # Published cost per sample (USD/h / samples/s): p4de 40.97/6000 = 0.00683 < p3.2xl 3.06/400 = 0.00765
    # < p3.16xl 24.48/3000 = 0.00816. Predicted: p3.2xl 3.06/300 = 0.0102 < p4de 40.97/4000 = 0.0102(4)
    # < p3.16xl 24.48/2900 = 0.00844 -> order p3.16xl, p3.2xl, p4de: the published order reversed.
    assert [e.offer.instance.name for e in ranking.entries] == ["p4de.24xlarge", "p3.2xlarge", "p3.16xlarge"]
    assert ranking.predicted_best.offer.instance.name == "p3.16xlarge"
    assert ranking.true_best.offer.instance.name == "p4de.24xlarge"
    assert ranking.first_to_best == pytest.approx((24.48 / 3000) / (40.96575 / 6000))
    assert ranking.spearman == pytest.approx(-1.0)


def test_ranking_agrees_when_the_prediction_orders_alike_and_an_alias_admits_g5(
    aws_types: dict[str, Offer],
) -> None:
    offers = [aws_types[n] for n in ("p3.2xlarge", "g5.xlarge", "g5.2xlarge")]
    items = [
        Predicted(row("V1", samples_per_s=400.0), 380.0),
        Predicted(row("A10", gpu="A10", samples_per_s=300.0), 250.0),
    ]
    (strict,) = rank_offers(items, offers)
    assert len(strict.entries) == 1 and math.isnan(strict.spearman)
    (loose,) = rank_offers(items, offers, as_table_gpu={"A10G": "A10"})
    assert [e.offer.instance.name for e in loose.entries] == ["g5.xlarge", "g5.2xlarge", "p3.2xlarge"]
    assert loose.spearman == pytest.approx(1.0)
    assert loose.first_to_best == 1.0
    assert {e.table_gpu for e in loose.entries} == {"A10", "V100-SXM2-16GB"}


def test_same_gpu_spread_is_the_widest_predicted_cost_gap_within_one_gpu_model(
    aws_types: dict[str, Offer],
) -> None:
    offers = [aws_types[n] for n in ("p3.2xlarge", "p3.16xlarge", "p4de.24xlarge")]
    items = [
        # p3.16xlarge costs 8 × p3.2xlarge per hour: 8 × 100 samples/s per 1 × 110 -> 10 % apart.
        Predicted(row("V1"), 100.0),
        Predicted(row("V8", gpus=8), 880.0),
        Predicted(row("A8", gpu="A100-SXM4-80GB", gpus=8), 5000.0),
    ]
    (ranking,) = rank_offers(items, offers)
    assert ranking.same_gpu_spread == pytest.approx(1.1 - 1)
    (alone,) = rank_offers(items, offers[2:])
    assert alone.same_gpu_spread == 0.0


def test_the_implied_bus_bandwidth_is_nccl_tests_busbw_of_the_step_growth() -> None:
    """nccl-tests' own line (the shared 2 × p5.48xlarge run: 16 ranks, 17179869184 B in 66132 µs, busbw
    487.09 GB/s) comes back from its time; a step that grew 0.1 s on 2 GPUs with 1 GB of gradients asks
    10 GB/s; a step that did not grow asks nothing of the link."""
    assert implied_allreduce_busbw_gbps(
        gradient_bytes=17179869184, gpus=16, grown_s=66132e-6
    ) == pytest.approx(487.09, abs=0.01)
    assert implied_allreduce_busbw_gbps(gradient_bytes=1e9, gpus=2, grown_s=0.1) == pytest.approx(10.0)
    assert math.isnan(implied_allreduce_busbw_gbps(gradient_bytes=1e9, gpus=2, grown_s=0.0))
    assert math.isnan(implied_allreduce_busbw_gbps(gradient_bytes=1e9, gpus=2, grown_s=-0.01))
    one = row("A 1x", samples_per_s=100.0, per_gpu_batch=128)
    two = row("A 2x", gpus=2, samples_per_s=160.0, per_gpu_batch=128)
    assert step_growth_s(one=one, n=two) == pytest.approx(256 / 160 - 128 / 100)
