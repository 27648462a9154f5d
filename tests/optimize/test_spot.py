"""Spot interruptions priced in: a hand-computed case, the Monte Carlo against the closed form, trace laws."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from srift.bandwidth.prior import AlphaBetaPrior
from srift.domain import Constraints, Objective
from srift.errors import InvalidInput
from srift.optimize.evaluate import Evaluations, SimEvaluator
from srift.optimize.space import Problem
from srift.optimize.spot import (
    Alternative,
    Alternatives,
    ReplanPolicy,
    RunRates,
    SpotOffer,
    SpotPolicy,
    ThinnedLaw,
    expected_run,
    fleet_rates,
    monte_carlo,
    renewal_run,
)
from srift.spot.model import FleetLaw, Scaling, TraceModel, Weibull
from srift.spot.shipped import shipped_model
from srift.testing.spot import one_offer_fleet

from .helpers import all_configs, candidate


def single(rate_per_s: float, *, count: int = 1, usd_per_s: float = 0.001) -> Alternatives:
    return Alternatives(
        items=[Alternative(counts=(count,), rates=RunRates(1.0, usd_per_s, 0.0, count * rate_per_s))],
        candidate_rates_per_s=(rate_per_s,),
    )


def test_hand_computed_one_vm_meets_its_deadline_only_if_never_interrupted() -> None:
    # 1000 iterations of 1 s on one spot VM interrupted at 1e-4/s; a checkpoint every 100 s; 150 s restart.
    # Any interruption costs ≥ 150 s, so a 1100 s deadline is met iff none happens: P = e^(-0.1) = 0.9048.
    # Expected time (closed form): 10 segments of 100 s, each (1/λ + D)(e^(λ·100) − 1)
    # = (10000 + 150)(e^0.01 − 1) = 102.0101 s → 1020.10 s; cost = 0.001 $/s × that = $1.0201.
    policy = SpotPolicy(checkpoint_interval_s=100.0, restart_s=150.0, samples=40_000, seed=1)
    closed = expected_run(RunRates(1.0, 0.001, 0.0, 1e-4), iterations=1000, policy=policy)
    assert closed.time_s == pytest.approx(10 * 10150 * math.expm1(0.01), rel=1e-12)
    assert closed.time_s == pytest.approx(1020.10, abs=0.01)
    assert closed.cost_usd == pytest.approx(1.02010, abs=1e-5)
    assert closed.interruptions == pytest.approx(10 * math.expm1(0.01))
    mc = monte_carlo(
        single(1e-4),
        start=0,
        iterations=1000,
        policy=policy,
        replan=ReplanPolicy.RESTART,
        time_limit_s=1100.0,
    )
    assert mc.p_meets_time_limit == pytest.approx(math.exp(-0.1), abs=0.005)
    assert mc.p_interrupted == pytest.approx(1 - math.exp(-0.1), abs=0.005)
    assert mc.mean_cost_usd == pytest.approx(1.0201, rel=0.01)


@pytest.mark.parametrize(
    ("count", "rate_per_hr", "checkpoint_s", "iterations"),
    [(8, 0.05, 600.0, 20_000), (4, 0.25, 1800.0, 10_000), (16, 0.01, 0.0, 50_000)],
)
def test_monte_carlo_agrees_with_the_closed_form_within_two_percent(
    count: int, rate_per_hr: float, checkpoint_s: float, iterations: int
) -> None:
    lam = rate_per_hr / 3600
    alts = single(lam, count=count, usd_per_s=count * 0.5 / 3600)
    policy = SpotPolicy(checkpoint_interval_s=checkpoint_s, restart_s=150.0, samples=20_000, seed=7)
    closed = expected_run(alts.items[0].rates, iterations=iterations, policy=policy)
    mc = monte_carlo(alts, start=0, iterations=iterations, policy=policy, replan=ReplanPolicy.RESTART)
    assert closed.interruptions > 0.3  # the case exercises interruptions
    assert mc.mean_time_s == pytest.approx(closed.time_s, rel=0.02)
    assert mc.mean_cost_usd == pytest.approx(closed.cost_usd, rel=0.02)
    assert mc.mean_interruptions == pytest.approx(closed.interruptions, rel=0.05)


def test_no_spot_vm_means_no_interruption() -> None:
    closed = expected_run(RunRates(2.0, 0.01, 0.001, 0.0), iterations=100, policy=SpotPolicy())
    assert (closed.time_s, closed.interruptions) == (200.0, 0.0)
    assert closed.cost_usd == pytest.approx(200 * 0.01 + 100 * 0.001)


def test_replanning_switches_to_the_on_demand_fallback_after_an_interruption() -> None:
    # Candidate 0: spot type, certain to be interrupted early; candidate 1: on-demand fallback.
    spot = Alternative(counts=(2, 0), rates=RunRates(1.0, 0.002, 0.0, 2 * 0.01), label="2 spot")
    od = Alternative(counts=(0, 2), rates=RunRates(1.0, 0.006, 0.0, 0.0), label="2 od")
    alts = Alternatives(items=[spot, od], candidate_rates_per_s=(0.01, 0.0), fallback=1)
    mc = monte_carlo(
        alts, start=0, iterations=1000, policy=SpotPolicy(samples=500, seed=3), time_limit_s=5000.0
    )
    # Interrupted at rate 0.02/s: almost surely within the first few hundred seconds, then on-demand.
    assert mc.mean_interruptions == pytest.approx(1.0, abs=0.01)
    assert mc.replans >= 1
    assert mc.p_meets_time_limit == 1.0


def test_bad_policy_values_name_their_field() -> None:
    with pytest.raises(InvalidInput) as info:
        SpotPolicy(restart_s=-1)
    assert info.value.field == "restart_s"


def _law(*, up_h: float, gap_h: float, shape: float = 1.0, nodes: int = 1) -> FleetLaw:
    up, gap = Weibull(shape, up_h * 3600.0 / math.gamma(1 + 1 / shape)), Weibull(1.0, gap_h * 3600.0)
    return FleetLaw(
        provider="aws",
        zone="us-east-1a",
        instance_type="p3.2xlarge",
        nodes=nodes,
        period="test",
        up=up,
        gap=gap,
        availability=up.mean_s / (up.mean_s + gap.mean_s),
        up_runs=100,
        gap_runs=100,
        observed_s=30 * 86400.0,
        tick_s=60.0,
    )


def _offer(*laws: FleetLaw) -> SpotOffer:
    model = TraceModel(laws=laws, scaling=Scaling(beta=0.0, gamma=0.0, points=0, drops={}, note="test"))
    return SpotOffer(model=model, provider="aws", region="us-east-1", instance_type="p3.2xlarge")


def test_a_capacity_gap_is_waited_out_unbilled() -> None:
    policy = SpotPolicy(checkpoint_interval_s=100.0, restart_s=150.0)
    plain = expected_run(RunRates(1.0, 0.001, 0.0, 1e-4), iterations=1000, policy=policy)
    gap = expected_run(
        RunRates(1.0, 0.001, 0.0, 1e-4, wait_s=3600.0, start_wait_s=60.0), iterations=1000, policy=policy
    )
    assert gap.interruptions == pytest.approx(plain.interruptions)
    assert gap.time_s == pytest.approx(plain.time_s + plain.interruptions * 3600.0 + 60.0)
    assert gap.cost_usd == pytest.approx(plain.cost_usd)


def test_trace_laws_price_a_fleet_by_its_periods() -> None:
    offer = _offer(
        replace(_law(up_h=2.0, gap_h=1.0), period="a"), replace(_law(up_h=8.0, gap_h=0.5), period="b")
    )
    regimes = offer.regimes(1)
    assert [r.interruptions_per_s * 3600 for r in regimes] == pytest.approx([0.5, 0.125])
    assert [r.wait_s / 3600 for r in regimes] == pytest.approx([1.0, 0.5])
    # Exponential gaps: the start wait is (1 − availability) × the mean gap.
    assert regimes[0].start_wait_s == pytest.approx((1 - 2 / 3) * 3600.0)
    assert offer.interruptions_per_s(1) == pytest.approx((0.5 + 0.125) / 2 / 3600)
    rates = fleet_rates(
        iteration_s=1.0, usd_per_s=0.001, egress_usd_per_iteration=0.0, members=[(1, 0.0, offer)]
    )
    policy = SpotPolicy(checkpoint_interval_s=600.0)
    both = expected_run(rates, iterations=20_000, policy=policy)
    each = [
        expected_run(
            RunRates(1.0, 0.001, 0.0, r.interruptions_per_s, r.wait_s, r.start_wait_s),
            iterations=20_000,
            policy=policy,
        )
        for r in regimes
    ]
    assert both.time_s == pytest.approx((each[0].time_s + each[1].time_s) / 2)


def test_the_monte_carlo_with_exponential_trace_laws_agrees_with_the_closed_form() -> None:
    offer = _offer(_law(up_h=3.0, gap_h=0.5))
    rates, alts = one_offer_fleet(offer, nodes=1, iteration_s=1.0, usd_per_s=0.002)
    policy = SpotPolicy(checkpoint_interval_s=600.0, restart_s=150.0, samples=6000, seed=5)
    closed = expected_run(rates, iterations=8 * 3600, policy=policy)
    mc = monte_carlo(alts, start=0, iterations=8 * 3600, policy=policy, replan=ReplanPolicy.RESTART)
    assert closed.interruptions > 2
    assert mc.mean_time_s == pytest.approx(closed.time_s, rel=0.03)
    assert mc.mean_cost_usd == pytest.approx(closed.cost_usd, rel=0.03)
    assert mc.mean_interruptions == pytest.approx(closed.interruptions, rel=0.05)


def test_heavier_early_interruptions_cost_more_than_the_same_mean_up_time_exponential() -> None:
    # A Weibull of shape 0.6 with the same mean up time takes fresh fleets down sooner and more often.
    policy = SpotPolicy(checkpoint_interval_s=600.0, restart_s=150.0, samples=3000, seed=9)

    def mean_time(law: FleetLaw) -> float:
        offer = _offer(law)
        _, alts = one_offer_fleet(offer, nodes=1, iteration_s=1.0, usd_per_s=0.002)
        return monte_carlo(
            alts, start=0, iterations=4 * 3600, policy=policy, replan=ReplanPolicy.RESTART
        ).mean_time_s

    assert mean_time(_law(up_h=2.0, gap_h=0.5, shape=0.6)) > 1.05 * mean_time(_law(up_h=2.0, gap_h=0.5))


@pytest.mark.parametrize(
    ("work_s", "every_s"), [(1000.0, 100.0), (4 * 3600.0 + 250.0, 600.0), (300.0, 600.0), (86_400.0, 30.0)]
)
def test_the_renewal_closed_form_of_an_exponential_law_is_the_exponential_closed_form(
    work_s: float, every_s: float
) -> None:
    # The last case has 2,880 segments: the renewal equation is solved by FFT there, term by term below.
    lam = 1.0 / 3600.0
    worked, fails = renewal_run(Weibull(1.0, 1.0 / lam), work_s=work_s, every_s=every_s)
    full = math.floor(work_s / every_s + 1e-9)
    expected = full * math.expm1(lam * every_s) + math.expm1(lam * (work_s - full * every_s))
    assert fails == pytest.approx(expected, rel=1e-9)
    assert worked == pytest.approx(expected / lam, rel=1e-9)


def test_the_closed_form_prices_a_law_of_early_interruptions_above_its_mean_rate() -> None:
    # The same mean up time: the closed form used to see only 1 / E[up], so both were priced alike.
    policy = SpotPolicy(checkpoint_interval_s=600.0, restart_s=150.0)

    def closed(law: FleetLaw) -> float:
        rates = fleet_rates(
            iteration_s=1.0, usd_per_s=0.002, egress_usd_per_iteration=0.0, members=[(1, 0.0, _offer(law))]
        )
        return expected_run(rates, iterations=4 * 3600, policy=policy).time_s

    assert closed(_law(up_h=2.0, gap_h=0.5, shape=0.6)) > 1.05 * closed(_law(up_h=2.0, gap_h=0.5))


@pytest.mark.parametrize(
    ("region", "nodes", "hours", "checkpoint_s"),
    [("us-west-2", 1, 4, 600.0), ("us-west-2", 16, 1, 3600.0), ("us-east-1", 4, 1, 3600.0)],
)
def test_the_closed_form_agrees_with_the_monte_carlo_on_the_shipped_laws(
    region: str, nodes: int, hours: int, checkpoint_s: float
) -> None:
    """Both price the same restart-in-place run (the Monte Carlo's RESTART) under the shipped trace laws:
    the expected time within 4 of the Monte Carlo's standard errors. The exponential closed form (Λ = 1 /
    E[up]) was 9–13 standard errors (23–43 %) below on these plans."""
    offer = SpotOffer(model=shipped_model(), provider="aws", region=region, instance_type="p3.2xlarge")
    rates, alts = one_offer_fleet(offer, nodes=nodes, iteration_s=10.0, usd_per_s=nodes * 3.06 / 3600.0)
    policy = SpotPolicy(checkpoint_interval_s=checkpoint_s, restart_s=150.0, samples=3000, seed=7)
    iterations = hours * 360
    closed = expected_run(rates, iterations=iterations, policy=policy)
    mc = monte_carlo(alts, start=0, iterations=iterations, policy=policy, replan=ReplanPolicy.RESTART)
    assert mc.mean_interruptions > 0.5
    assert abs(closed.time_s - mc.mean_time_s) < 4.0 * mc.stderr_time_s
    assert closed.cost_usd == pytest.approx(mc.mean_cost_usd, rel=0.05)
    assert closed.interruptions == pytest.approx(mc.mean_interruptions, rel=0.1)


def test_unbilled_capacity_waits_are_no_contract_violation() -> None:
    """A spot offer whose capacity stays away for hours: the expected run waits unbilled, so its expected
    cost is below expected time × rent; the evaluator kept its contract (cost ≥ the uninterrupted time ×
    rent), so no violation is recorded and a plan on it can still be proven."""
    law = _law(up_h=0.5, gap_h=6.0)
    cand = replace(
        candidate("p3.2xlarge", gpus=1, max_batch=64, per_sample_s=0.01, price=3.06, cap=4),
        interruptions_per_s=1 / 1800,
        spot_offer=_offer(law),
    )
    problem = Problem(
        (cand,),
        Constraints(128, 20_000, Objective.MIN_TIME),
        spot=SpotPolicy(checkpoint_interval_s=600.0, restart_s=150.0),
    )
    evals = Evaluations(problem, SimEvaluator(bandwidth=AlphaBetaPrior()))
    groups = ((0, 2, 64),)
    priced = evals.evaluate(groups).prediction
    assert priced.cost_usd < priced.total_time_s * problem.usd_per_s(groups) * 0.9
    assert priced.uninterrupted_cost_usd is not None
    assert priced.cost_usd >= priced.uninterrupted_cost_usd
    assert evals.violations == 0


def _mixed_fleet(offer: SpotOffer, *, band_per_vm_s: float) -> tuple[RunRates, Alternatives]:
    """One VM of the traced `offer` beside two band-priced VMs, as the closed form and the Monte Carlo
    take it."""
    rates = fleet_rates(
        iteration_s=1.0,
        usd_per_s=0.003,
        egress_usd_per_iteration=0.0,
        members=[(1, 0.0, offer), (2, band_per_vm_s, None)],
    )
    alternatives = Alternatives(
        items=[Alternative(counts=(1, 2), rates=rates)],
        candidate_rates_per_s=(offer.interruptions_per_s(1), band_per_vm_s),
        candidate_offers=(offer, None),
    )
    return rates, alternatives


def test_a_traced_offer_beside_a_band_priced_one_is_priced_under_both_laws() -> None:
    """The closed form prices a mixed fleet under the first of the traced law's and the band VMs'
    interruptions, the capacity gap only after the traced group's: within 3 of the Monte Carlo's standard
    errors (RESTART). Priced as exponential at the summed rate it was 27 standard errors (3,976 s) off."""
    offer = _offer(
        replace(_law(up_h=2.0, gap_h=0.5, shape=0.5), period="a"),
        replace(_law(up_h=6.0, gap_h=1.0, shape=0.7), period="b"),
    )
    rates, alts = _mixed_fleet(offer, band_per_vm_s=1 / (10 * 3600))
    policy = SpotPolicy(checkpoint_interval_s=600.0, restart_s=150.0, samples=4000, seed=11)
    closed = expected_run(rates, iterations=6 * 3600, policy=policy)
    mc = monte_carlo(alts, start=0, iterations=6 * 3600, policy=policy, replan=ReplanPolicy.RESTART)
    assert mc.mean_interruptions > 2
    assert abs(closed.time_s - mc.mean_time_s) < 3.0 * mc.stderr_time_s
    assert closed.cost_usd == pytest.approx(mc.mean_cost_usd, rel=0.03)
    assert closed.interruptions == pytest.approx(mc.mean_interruptions, rel=0.05)


def test_an_exponential_law_beside_band_priced_vms_is_the_exponential_closed_form_at_the_summed_rate() -> (
    None
):
    """Exactness where it exists: a traced law of shape 1 (rate 1 / E[up]) thinned by the band VMs is an
    exponential at the summed rate; only the traced group's share of the interruptions waits a gap."""
    lam, band = 1 / 3600, 2 / (10 * 3600)
    worked, fails = renewal_run(
        ThinnedLaw(Weibull(1.0, 1 / lam), band), work_s=4 * 3600 + 250.0, every_s=600.0
    )
    assert fails / worked == pytest.approx(lam + band, rel=1e-9)
    rates, _ = _mixed_fleet(_offer(_law(up_h=1.0, gap_h=0.5)), band_per_vm_s=band / 2)
    policy = SpotPolicy(checkpoint_interval_s=600.0, restart_s=150.0)
    mixed = expected_run(rates, iterations=8 * 3600, policy=policy)
    start = rates.regimes[0].start_wait_s
    plain = expected_run(RunRates(1.0, 0.003, 0.0, lam + band), iterations=8 * 3600, policy=policy)
    assert mixed.interruptions == pytest.approx(plain.interruptions, rel=1e-9)
    assert mixed.cost_usd == pytest.approx(plain.cost_usd, rel=1e-9)
    gaps = plain.interruptions * lam / (lam + band) * 1800.0
    assert mixed.time_s == pytest.approx(plain.time_s + gaps + start, rel=1e-9)


def test_location_pruning_keeps_a_region_whose_band_beats_a_traced_law_of_lower_mean_rate() -> None:
    """Symmetry of locations under the closed form. East offers p3.2xlarge under a traced law of lower
    mean rate (1 / E[up] = 1/6 h against west's band 1/4 h) but early interruptions (shape 0.4) and 2 h
    capacity gaps; both regions offer g4dn.xlarge at the same band; 256 samples need two VMs of each type.
    West's fleet is the best one; the search used to take east as dominating west on the mean rate alone,
    skip fleets within west and return a fleet twice as slow (37,078 s against 19,812 s)."""
    from srift.domain.geo import Location
    from srift.optimize.exhaustive import dominated_locations, solve_exhaustive

    east, west = Location("aws", "us-east-1"), Location("aws", "us-west-2")
    p3 = candidate("p3.2xlarge", gpus=1, max_batch=64, per_sample_s=0.01, price=3.06, cap=2)
    g4 = candidate("g4dn.xlarge", gpus=1, max_batch=64, per_sample_s=0.012, price=0.53, cap=2)
    offer = _offer(_law(up_h=6.0, gap_h=2.0, shape=0.4))
    band = 1 / (4 * 3600)
    cands = (
        replace(g4, location=east, interruptions_per_s=band),
        replace(g4, location=west, interruptions_per_s=band),
        replace(p3, location=east, interruptions_per_s=offer.interruptions_per_s(1), spot_offer=offer),
        replace(p3, location=west, interruptions_per_s=band),
    )
    problem = Problem(
        cands,
        Constraints(256, 20_000, Objective.MIN_TIME),
        spot=SpotPolicy(checkpoint_interval_s=600.0, restart_s=150.0),
    )
    assert cands[2].interruptions_per_s < cands[3].interruptions_per_s
    evaluator = SimEvaluator(bandwidth=AlphaBetaPrior())
    evals = Evaluations(problem, evaluator)
    every = {groups: evals.evaluate(groups).prediction.total_time_s for groups in all_configs(problem)}
    best = min(every, key=every.__getitem__)
    assert {problem.candidates[i].location for i, _, _ in best} == {west}
    result = solve_exhaustive(problem, Evaluations(problem, evaluator))
    assert result.complete
    assert result.incumbent.value == pytest.approx(every[best], rel=1e-12)
    assert dominated_locations(problem) == frozenset()
    # Band rates alone: a lower rate is a dominance (expected time and cost rise with Λ), kept.
    banded = replace(problem, candidates=(*cands[:2], replace(cands[2], spot_offer=None), cands[3]))
    assert dominated_locations(banded) == frozenset({west})
