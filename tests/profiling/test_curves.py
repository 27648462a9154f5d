"""The pure parts of the compute model: largest-batch search, breakpoints, curve fit, pooling of timing
passes, MAPE, spread."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from srift.domain.profile import ModelProfile
from srift.domain.profile_document import read_profile
from srift.errors import InvalidInput
from srift.profiling.curves import (
    CurveSamples,
    PointTiming,
    breakpoints,
    coefficient_of_variation,
    fit_curve,
    largest_fitting,
    mape,
    mean_point,
    midpoint,
    pool_curve_samples,
    refine_breakpoints,
)


@given(threshold=st.integers(0, 5000), cap=st.integers(1, 5000))
def test_largest_fitting_finds_the_threshold_or_the_cap(threshold: int, cap: int) -> None:
    calls: list[int] = []

    def fits(batch: int) -> bool:
        calls.append(batch)
        return batch <= threshold

    assert largest_fitting(fits, cap=cap) == min(threshold, cap)
    assert all(1 <= b <= cap for b in calls)
    assert len(calls) <= 2 * cap.bit_length() + 2


def test_largest_fitting_probes_the_neighbour_that_fails() -> None:
    calls: list[int] = []

    def fits(batch: int) -> bool:
        calls.append(batch)
        return batch <= 300

    assert largest_fitting(fits, cap=4096) == 300
    assert 301 in calls and 300 in calls
    assert calls[:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]


def test_largest_fitting_rejects_a_cap_below_one() -> None:
    with pytest.raises(InvalidInput) as caught:
        largest_fitting(lambda b: True, cap=0)
    assert caught.value.field == "max_batch"


@pytest.mark.parametrize(
    ("max_batch", "expected"),
    [
        (1, (1,)),
        (2, (1, 2)),
        (3, (1, 2, 3)),
        (4, (1, 3, 4)),
        (512, (1, 171, 341, 512)),
        (300, (1, 100, 200, 300)),
    ],
)
def test_breakpoints_are_one_third_two_thirds_and_max(max_batch: int, expected: tuple[int, ...]) -> None:
    assert breakpoints(max_batch) == expected


def test_fit_curve_passes_through_the_points_and_interpolates_linearly() -> None:
    curve = fit_curve([1, 100, 200, 300], [0.01, 0.2, 0.5, 0.6])
    assert curve.time_s(100) == pytest.approx(0.2)
    assert curve.time_s(150) == pytest.approx(0.35)
    assert curve.time_s(250) == pytest.approx(0.55)
    assert curve.time_s(400) == pytest.approx(0.7)


def test_mape_and_coefficient_of_variation() -> None:
    assert mape([1.1, 0.9], [1.0, 1.0]) == pytest.approx(10.0)
    assert coefficient_of_variation([1.0, 1.0, 1.0]) == 0.0
    assert coefficient_of_variation([0.9, 1.1]) == pytest.approx(0.1414, abs=1e-3)
    assert coefficient_of_variation([1.0]) == 0.0


def _profile_with_samples(profile_doc: dict[str, Any]) -> ModelProfile:
    own = CurveSamples(
        batches=(1, 32, 64, 96),
        forward_s=((0.004,), (0.030, 0.032), (0.058,), (0.087,)),
        backward_s=((0.007,), (0.061,), (0.117,), (0.175, 0.177)),
    )
    return read_profile(profile_doc | {"extra": {"measured": own.to_dict(), "clock": "wall"}})


def test_median_times_are_each_batchs_median_forward_and_backward() -> None:
    samples = CurveSamples(
        batches=(1, 8),
        forward_s=((0.003, 0.001, 0.002), (0.010, 0.014)),
        backward_s=((0.006, 0.005, 0.004), (0.020, 0.030)),
    )
    assert samples.median_times_s() == {1: (0.002, 0.005), 8: (0.012, 0.025)}


def test_pooling_refits_the_curves_to_the_mean_of_the_passes_means(profile_doc: dict[str, Any]) -> None:
    profile = _profile_with_samples(profile_doc)
    slower = CurveSamples(
        batches=(1, 32, 64, 96),
        forward_s=((0.006, 0.006), (0.040, 0.040), (0.070, 0.070), (0.100, 0.100)),
        backward_s=((0.009, 0.009), (0.080, 0.080), (0.140, 0.140), (0.200, 0.200)),
    )
    pooled = pool_curve_samples(profile, [slower])
    # forward at 32: the profile's own pass (30 + 32) / 2 = 31 ms and the further pass's 40 ms give
    # 35.5; backward at 96: (176 + 200) / 2 = 188 ms
    assert pooled.forward.times_s == pytest.approx((0.005, 0.0355, 0.064, 0.0935))
    assert pooled.backward.times_s == pytest.approx((0.008, 0.0705, 0.1285, 0.188))
    assert pooled.extra["measured"]["forward_s"][1] == [0.030, 0.032, 0.040, 0.040]
    assert pooled.extra["measured_passes"][1]["compute_s"] == pytest.approx([0.015, 0.12, 0.21, 0.3])
    # each pass keeps its steps' forward + backward, so the spread can tell drift from sampling noise
    # (steps pair forward and backward in order; an unpaired phase sample is left out)
    own_steps = pooled.extra["measured_passes"][0]["compute_samples_s"]
    assert [[round(t, 6) for t in ts] for ts in own_steps] == [[0.011], [0.091], [0.175], [0.262]]
    assert pooled.extra["measured_passes"][1]["compute_samples_s"][1] == pytest.approx([0.12, 0.12])
    assert pooled.extra["timing_passes"] == 2
    assert pooled.extra["clock"] == "wall"
    assert (pooled.layers, pooled.max_batch, pooled.update_s) == (
        profile.layers,
        profile.max_batch,
        profile.update_s,
    )
    again = pool_curve_samples(pooled, [slower])
    assert again.extra["timing_passes"] == 3
    # three passes: 4, 6 and 6 ms at batch 1
    assert again.forward.time_s(1) == pytest.approx(0.016 / 3)
    assert slower.compute_s(48) == pytest.approx(0.055 + 0.110)


def test_a_pass_weighs_one_moment_whatever_its_repeats(profile_doc: dict[str, Any]) -> None:
    """The profile's own pass timed five steps of 10 + 20 ms at each batch, one further pass two steps of
    20 + 40 ms: the curve is (15, 30) ms, the mean of the two moments, not the samples' (90 / 7, 180 / 7)."""
    own = CurveSamples(batches=(1, 2), forward_s=((0.010,) * 5,) * 2, backward_s=((0.020,) * 5,) * 2)
    profile = read_profile(profile_doc | {"extra": {"measured": own.to_dict()}})
    later = CurveSamples(batches=(1, 2), forward_s=((0.020,) * 2,) * 2, backward_s=((0.040,) * 2,) * 2)
    pooled = pool_curve_samples(profile, [later])
    assert (pooled.forward.time_s(1), pooled.backward.time_s(2)) == pytest.approx((0.015, 0.030))
    # a profile pooled by older code recorded each pass's sum only: its samples count as one pass
    old = read_profile(
        profile_doc
        | {
            "extra": {
                "measured": pooled.extra["measured"],
                "measured_passes": [{"batches": [1, 2], "compute_s": [0.03, 0.03]}] * 2,
                "timing_passes": 2,
            }
        }
    )
    # its pooled samples: forward (5 × 10 + 2 × 20) / 7 ms, then this pass's 20 ms
    assert pool_curve_samples(old, [later]).forward.time_s(1) == pytest.approx((0.090 / 7 + 0.020) / 2)


def test_a_point_is_the_mean_of_each_phase_and_so_of_the_steps() -> None:
    """A quarter-core quota (2.5 ms per 10 ms period): forward costs 9 ms of CPU and backward 16, so each
    reads its CPU time plus 3 or 4 (forward) and 6 or 7 (backward) throttled periods of 7.5 ms, whichever
    the step's start in the period gives: forward 31.5 or 39, backward 61 or 68.5. Five steps: forward
    31.5, 31.5, 31.5, 39, 39 and backward 68.5, 68.5, 61, 61, 61: the steps 100, 100, 92.5, 100, 100, whose
    mean (98.5, what a training loop of such steps averages) is the sum of the phases' means, 34.5 + 64. The
    medians would give 31.5 + 61 = 92.5 for the phases and 100 for the steps."""
    forward = (0.0315, 0.0315, 0.0315, 0.039, 0.039)
    backward = (0.0685, 0.0685, 0.061, 0.061, 0.061)
    fw, bw = mean_point(forward, backward)
    assert (fw, bw) == pytest.approx((0.0345, 0.064))
    assert fw + bw == pytest.approx(sum(f + b for f, b in zip(forward, backward, strict=True)) / 5)
    assert mean_point(forward, backward[:4]) == pytest.approx(
        (0.0345, 0.06475)
    )  # unpaired: each phase's mean
    assert mean_point((0.0,), (0.0,)) == (0.0, 0.0)
    curves = CurveSamples(batches=(1, 2), forward_s=(forward, forward), backward_s=(backward, backward))
    assert curves.compute_s(1) == pytest.approx(0.0985)


def test_pooling_with_no_passes_keeps_the_means(profile_doc: dict[str, Any]) -> None:
    profile = _profile_with_samples(profile_doc)
    same = pool_curve_samples(profile, [])
    assert same.forward.times_s == pytest.approx((0.004, 0.031, 0.058, 0.087))
    assert same.backward.times_s == pytest.approx((0.007, 0.061, 0.117, 0.176))


def test_pooling_rejects_other_batches_and_profiles_without_samples(profile_doc: dict[str, Any]) -> None:
    profile = _profile_with_samples(profile_doc)
    other = CurveSamples(batches=(1, 30, 60, 96), forward_s=((0.1,),) * 4, backward_s=((0.1,),) * 4)
    with pytest.raises(InvalidInput, match="breakpoints are \\[1, 32, 64, 96\\]") as caught:
        pool_curve_samples(profile, [other])
    assert "To fix" in str(caught.value)
    with pytest.raises(InvalidInput, match="not a timing pass"):
        pool_curve_samples(read_profile(profile_doc), [other])


@pytest.mark.parametrize(
    ("forward", "message"),
    [(((0.1,),), "one list"), (((0.1,), ()), "empty list"), (((0.1,), (-1.0,)), "negative")],
)
def test_curve_samples_reject_malformed_passes(forward: tuple[tuple[float, ...], ...], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        CurveSamples(batches=(1, 2), forward_s=forward, backward_s=((0.1,), (0.2,)))


Measure = Callable[[tuple[int, ...]], dict[int, PointTiming]]


def _recording(time_s: Callable[[int], float], spread: float = 0.0) -> tuple[list[tuple[int, ...]], Measure]:
    calls: list[tuple[int, ...]] = []

    def measure(batches: tuple[int, ...]) -> dict[int, PointTiming]:
        calls.append(batches)
        return {b: PointTiming(time_s(b), spread) for b in batches}

    return calls, measure


@pytest.mark.parametrize(
    ("lo", "hi", "mid"), [(1, 85, 9), (85, 171, 121), (1, 3, 2), (1, 2, None), (2, 3, None), (100, 102, 101)]
)
def test_midpoints_are_geometric_and_strictly_inside(lo: int, hi: int, mid: int | None) -> None:
    assert midpoint(lo, hi) == mid


def test_a_straight_curve_keeps_the_paper_breakpoints_after_one_round() -> None:
    calls, measure = _recording(lambda b: 0.002 + 0.0007 * b)
    points, checks = refine_breakpoints((1, 85, 171, 256), measure)
    assert points == (1, 85, 171, 256)
    assert calls == [(1, 9, 85, 121, 171, 209, 256)]
    assert [(c.batch, c.lo, c.hi, c.split) for c in checks] == [
        (9, 1, 85, False),
        (121, 85, 171, False),
        (209, 171, 256, False),
    ]
    assert all(abs(c.deviation) < 1e-9 for c in checks)


def test_a_knee_is_followed_by_splitting_bent_segments_recursively() -> None:
    def knee(b: int) -> float:
        return 0.009 if b == 1 else 0.020 + 0.00055 * b

    calls, measure = _recording(knee)
    points, checks = refine_breakpoints((1, 85, 171, 256), measure)
    first = checks[0]
    assert (first.batch, first.split) == (9, True) and first.deviation > 0.3
    assert calls[1] == (1, 3, 9, 28, 85)
    assert [(c.batch, c.split) for c in checks[3:]] == [(3, True), (28, False), (2, True), (5, False)]
    assert points == (1, 2, 3, 9, 85, 171, 256)
    _, measure = _recording(knee)
    assert len(refine_breakpoints((1, 85, 171, 256), measure, max_checks=4)[1]) == 4
    fit = fit_curve(points, [knee(b) for b in points])
    paper = fit_curve((1, 85, 171, 256), [knee(b) for b in (1, 85, 171, 256)])
    for b in (29, 57):
        assert abs(fit.time_s(b) - knee(b)) < abs(paper.time_s(b) - knee(b))
        assert abs(fit.time_s(b) - knee(b)) / knee(b) < 0.05


def test_refinement_respects_its_budget_and_narrow_segments() -> None:
    calls, measure = _recording(lambda b: 1.0 if b % 2 else 2.0)
    points, checks = refine_breakpoints((1, 3), measure, max_checks=2)
    assert len(checks) == 1 and checks[0].batch == 2 and checks[0].split
    assert points == (1, 2, 3)
    calls, measure = _recording(lambda b: 1.0)
    assert refine_breakpoints((1, 2), measure) == ((1, 2), ())
    assert calls == []
    with pytest.raises(InvalidInput, match="tolerance"):
        refine_breakpoints((1, 9), measure, tolerance=0)


def test_checks_record_the_largest_timing_spread_of_their_three_points() -> None:
    _, measure = _recording(lambda b: 0.002 + 0.0007 * b, spread=0.03)
    _, checks = refine_breakpoints((1, 85, 171, 256), measure)
    assert all(c.noise == pytest.approx(0.03) and not c.split for c in checks)
    assert checks[0].to_dict()["noise"] == 0.03


def test_point_timing_spread_is_half_the_relative_interquartile_range() -> None:
    assert PointTiming.of([0.010]) == PointTiming(0.010, 0.0)
    samples = [0.009, 0.010, 0.010, 0.011, 0.030]
    timing = PointTiming.of(samples)
    assert timing.median_s == pytest.approx(0.010)
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    assert timing.spread == pytest.approx((q3 - q1) / 2 / 0.010)
