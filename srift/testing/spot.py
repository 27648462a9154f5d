"""Spot traces drawn from the shipped interruption model, for tests that need a trace set to replay; and
one spot fleet on one offer, priced both ways (closed form and Monte Carlo), for the checks that compare them.

The raw public traces are not shipped (srift.spot.shipped), so a test that replays a plan imports traces
drawn from the shipped laws of the zones it covers: one availability timeline per zone, as long as asked,
at the law's own tick, its fleet wholly up or wholly down. Each trace says where it came from (the law it
was drawn from and the seed), so nobody mistakes it for a recorded one.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from srift.optimize.spot import Alternative, Alternatives, RunRates, SpotOffer, fleet_rates
from srift.spot.shipped import SHIPPED_MODEL, shipped_model
from srift.spot.traces import SpotTrace, TraceKind, TraceMeta, TraceSource

DRAWN_REPOSITORY = "srift-tests/drawn-from-shipped-laws"


def drawn_traces(
    *,
    provider: str,
    region: str,
    instance_type: str,
    nodes: int,
    days: float,
    seed: int,
    tick_s: float | None = None,
) -> list[SpotTrace]:
    """One availability trace of `nodes` VMs per zone of `region` the shipped model covers for the type,
    `days` long, drawn from the zone's latest period's law for that fleet size (seeded), at `tick_s`
    (default: the law's own tick; a coarser one makes a replay through it quicker)."""
    model = shipped_model()
    out = []
    for i, zone in enumerate(model.zones(provider=provider, region=region, instance_type=instance_type)):
        law = model.zone_laws(provider=provider, zone=zone, instance_type=instance_type, nodes=nodes)[-1]
        tick = tick_s or law.tick_s
        ticks = math.ceil(days * 86_400.0 / tick)
        up = law.timeline(np.random.default_rng([seed, i]), runs=1, ticks=ticks, tick_s=tick)[0]
        counts = tuple(int(nodes) if u else 0 for u in up)
        name = f"{zone}_{instance_type}_{nodes}_seed{seed}.json"
        digest = hashlib.sha256(repr((law.period, seed, counts)).encode()).hexdigest()
        note = f"drawn from the shipped law of {law.period} (seed {seed}), not a recorded trace"
        meta = TraceMeta(provider, zone, instance_type, TraceKind.AVAILABILITY, nodes, None, note)
        source = TraceSource(DRAWN_REPOSITORY, f"{SHIPPED_MODEL.name}/{name}", None, digest)
        out.append(SpotTrace(meta=meta, gap_s=tick, counts=counts, source=source))
    return out


def p3_fleet_traces(*, seed: int, tick_s: float = 300.0) -> list[SpotTrace]:
    """Eight days of drawn availability for 4 × p3.2xlarge in each us-east-1 zone the shipped model covers:
    the imported history the spot plans of the API and dashboard tests are replayed through or conditioned
    on (each test module its own seed, so that their traces differ)."""
    return drawn_traces(
        provider="aws",
        region="us-east-1",
        instance_type="p3.2xlarge",
        nodes=4,
        days=8.0,
        seed=seed,
        tick_s=tick_s,
    )


def one_offer_fleet(
    offer: SpotOffer, *, nodes: int, iteration_s: float, usd_per_s: float
) -> tuple[RunRates, Alternatives]:
    """`nodes` VMs of `offer` and nothing else: the rates `expected_run` prices (the offer's laws, no
    egress) and the same fleet as the only alternative `monte_carlo` draws (the offer's rate for that many
    VMs), so that both price one run."""
    rates = fleet_rates(
        iteration_s=iteration_s,
        usd_per_s=usd_per_s,
        egress_usd_per_iteration=0.0,
        members=[(nodes, 0.0, offer)],
    )
    alternatives = Alternatives(
        items=[Alternative(counts=(nodes,), rates=rates)],
        candidate_rates_per_s=(offer.interruptions_per_s(nodes),),
        candidate_offers=(offer,),
    )
    return rates, alternatives
