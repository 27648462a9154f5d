"""Spot pricing with the interruption model fitted to traces (srift.services.placement.price_interruptions):
an offer the traces cover carries its laws and says so; one they do not cover names its fallback band and
widens it; the closed form and the Monte Carlo outlook then price the traced fleet with its laws."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from srift.catalog.geo import shipped_spot
from srift.domain.geo import Location
from srift.optimize.spot import (
    Alternative,
    Alternatives,
    ReplanPolicy,
    SpotPolicy,
    expected_run,
    fleet_rates,
    monte_carlo,
)
from srift.services.placement import price_interruptions
from srift.spot.model import Half, Weibull, fit_model
from srift.spot.traces import SpotTrace, TraceKind, TraceMeta, TraceSource
from tests.services.test_memory import candidate

EAST = Location("aws", "us-east-1")


def _trace(rng: np.random.Generator) -> SpotTrace:
    """Ten days of a 1-VM p3.2xlarge trace in us-east-1a: Weibull up times (mean ~3 h), gaps of ~1 h."""
    up, gap = Weibull(0.7, 2.4 * 3600.0), Weibull(1.0, 3600.0)
    ticks, tick_s = 10 * 288, 300.0
    counts = np.zeros(ticks, dtype=np.int64)
    t, on = 0.0, True
    while t < ticks * tick_s:
        d = float((up if on else gap).sample(rng, 1)[0])
        if on:
            counts[int(t // tick_s) : int((t + d) // tick_s)] = 1
        t, on = t + d, not on
    meta = TraceMeta("aws", "us-east-1a", "p3.2xlarge", TraceKind.AVAILABILITY, 1, date(2024, 1, 1))
    source = TraceSource("test", "us-east-1a.json", None, "0" * 64)
    return SpotTrace(meta=meta, gap_s=tick_s, counts=tuple(int(c) for c in counts), source=source)


def test_a_traced_offer_carries_its_laws_and_an_untraced_one_names_and_widens_its_band() -> None:
    model = fit_model([_trace(np.random.default_rng(5))], half=Half.ALL)
    traced = candidate("p3.2xlarge", gpus=1, max_batch=64, per_sample_s=0.01, price=1.0, cap=8)
    other = candidate("g9.test", gpus=1, max_batch=64, per_sample_s=0.01, price=1.0, cap=8)
    priced, infos = price_interruptions(
        (traced, other),
        facts=shipped_spot(),
        default_location=Location("aws", "us-east-1"),
        overrides={},
        model=model,
    )
    by = {i.instance_type: i for i in infos}
    assert priced[0].spot_offer is not None and by["p3.2xlarge"].band == "traces"
    assert "us-east-1a" in by["p3.2xlarge"].source
    # One VM's rate is 1 / E[up] of its law.
    law = priced[0].spot_offer.laws(1)[0]
    assert priced[0].interruptions_per_s == pytest.approx(1.0 / law.up.mean_s)
    assert priced[1].spot_offer is None
    band = shipped_spot().bands[by["g9.test"].band]
    low, high = by["g9.test"].widened_monthly or (1.0, 0.0)
    assert low <= band[0] and high >= band[1] and (low, high) != (band[0], band[1])
    assert "no trace covers g9.test" in by["g9.test"].source and "fallback band" in by["g9.test"].source
    # Without a model the shipped bands alone price both, as before.
    plain, plain_infos = price_interruptions(
        (traced,), facts=shipped_spot(), default_location=EAST, overrides={}
    )
    assert plain[0].spot_offer is None and plain_infos[0].widened_monthly is None


def test_the_closed_form_and_monte_carlo_price_a_traced_fleet_with_its_capacity_gaps() -> None:
    model = fit_model([_trace(np.random.default_rng(6))], half=Half.ALL)
    traced = candidate("p3.2xlarge", gpus=1, max_batch=64, per_sample_s=0.01, price=1.0, cap=8)
    priced, _ = price_interruptions(
        (traced,),
        facts=shipped_spot(),
        default_location=Location("aws", "us-east-1"),
        overrides={},
        model=model,
    )
    offer = priced[0].spot_offer
    assert offer is not None
    lam = priced[0].interruptions_per_s
    policy = SpotPolicy(checkpoint_interval_s=600.0, restart_s=150.0, samples=4000, seed=1)
    with_laws = fleet_rates(
        iteration_s=1.0, usd_per_s=0.001, egress_usd_per_iteration=0.0, members=[(1, lam, offer)]
    )
    poisson = fleet_rates(
        iteration_s=1.0, usd_per_s=0.001, egress_usd_per_iteration=0.0, members=[(1, lam, None)]
    )
    closed = expected_run(with_laws, iterations=8 * 3600, policy=policy)
    plain = expected_run(poisson, iterations=8 * 3600, policy=policy)
    # The same rate, but capacity gaps of ~1 h after each interruption: the traced fleet takes longer.
    assert closed.time_s > plain.time_s + 0.5 * plain.interruptions * 3600.0
    alts = Alternatives(
        items=[Alternative((1,), with_laws, "spot")], candidate_rates_per_s=(lam,), candidate_offers=(offer,)
    )
    mc = monte_carlo(alts, start=0, iterations=8 * 3600, policy=policy, replan=ReplanPolicy.RESTART)
    assert mc.mean_time_s == pytest.approx(closed.time_s, rel=0.15)
