"""Random small optimizer problems, generated from a seed so hypothesis and fixed samples share one family."""

from __future__ import annotations

import random

from srift.domain import ComputeCurve, Constraints, ModelProfile, Objective
from srift.optimize.space import BatchPolicy, Problem

from .helpers import candidate


def make_problem(seed: int, *, policy: BatchPolicy | None = None) -> Problem:
    """1–3 instance types (1, 2 or 4 GPUs, max batch 2–16 per GPU, caps 1–4), a global batch of 8–64,
    either objective, and each limit present or absent."""
    rng = random.Random(seed)
    k = rng.randint(1, 3)
    cands = []
    for j in range(k):
        gpus = rng.choice([1, 1, 2, 4])
        cands.append(
            candidate(
                f"t{j}.{gpus}x",
                gpus=gpus,
                max_batch=rng.choice([2, 4, 8, 16]),
                per_sample_s=rng.uniform(0.001, 0.02) / gpus**0.5,
                price=rng.uniform(0.2, 4.0) * gpus,
                cap=rng.randint(1, 4),
                network_gbps=rng.choice([5.0, 10.0, 25.0]),
            )
        )
    cands.sort(key=lambda c: c.name)
    objective = rng.choice(list(Objective))
    time_limit = rng.choice([None, rng.uniform(1.0, 30.0)])
    budget = rng.choice([None, rng.uniform(0.0005, 0.3)])
    constraints = Constraints(
        global_batch=rng.choice([8, 12, 16, 20, 24, 32, 40, 48, 64]),
        iterations=100,
        objective=objective,
        time_limit_s=time_limit,
        budget_usd=budget,
    )
    return Problem(tuple(cands), constraints, policy or rng.choice(list(BatchPolicy)))


def make_mixed_problem(seed: int) -> Problem:
    """3–5 instance types with small caps (1–2) and a global batch of 8–48, so that most optima mix types:
    the family that exercises bounds coupled across types (set-aside, VM-count coupling)."""
    rng = random.Random(10_000 + seed)
    k = rng.randint(3, 5)
    cands = []
    for j in range(k):
        gpus = rng.choice([1, 1, 2, 4])
        cands.append(
            candidate(
                f"m{j}.{gpus}x",
                gpus=gpus,
                max_batch=rng.choice([2, 4, 8]),
                per_sample_s=rng.uniform(0.001, 0.02) / gpus**0.5,
                price=rng.uniform(0.2, 4.0) * gpus,
                cap=rng.randint(1, 2),
                network_gbps=rng.choice([5.0, 10.0, 25.0]),
            )
        )
    cands.sort(key=lambda c: c.name)
    objective = rng.choice(list(Objective))
    constraints = Constraints(
        global_batch=rng.choice([8, 12, 16, 24, 32, 48]),
        iterations=100,
        objective=objective,
        time_limit_s=rng.choice([None, rng.uniform(1.0, 30.0)]),
        budget_usd=rng.choice([None, rng.uniform(0.0005, 0.3)]),
    )
    return Problem(tuple(cands), constraints, rng.choice(list(BatchPolicy)))


def make_located_problem(seed: int) -> Problem:
    """2–3 instance types, each offered in two regions at slightly different prices (caps 1–2), a global
    batch of 8–32: fleets may span the regions, so the bounds must stay below the simulator's links."""
    from dataclasses import replace

    from srift.domain.geo import Location

    rng = random.Random(20_000 + seed)
    base = make_mixed_problem(seed)
    types = base.candidates[: rng.randint(2, 3)]
    where = (Location("aws", "us-east-1"), Location("aws", "us-west-2"))
    cands = []
    for cand in types:
        for loc in where:
            offer = replace(cand.offer, price_usd_per_hr=cand.offer.price_usd_per_hr * rng.uniform(0.8, 1.2))
            cands.append(replace(cand, offer=offer, location=loc, cap=rng.randint(1, 2)))
    cands.sort(key=lambda c: c.sort_key)
    constraints = replace(base.constraints, global_batch=rng.choice([8, 12, 16, 24, 32]))
    return Problem(tuple(cands), constraints, base.batch_policy)


def make_user_problem(seed: int) -> Problem:
    """A user's own model, shrunk: 2–4 instance types whose profiles hold few samples per GPU (largest batch
    1–4, so fleets need many VMs of a type: caps 2–6) or curves of 3 or 11 segments that bend both ways
    (largest batch 12–16), a global batch of 6–24, either objective, limits at the default confidence."""
    from dataclasses import replace

    rng = random.Random(30_000 + seed)
    k = rng.randint(2, 4)
    cands = []
    for j in range(k):
        gpus = rng.choice([1, 1, 2])
        small = rng.random() < 0.6
        max_batch = rng.choice([1, 2, 3, 4]) if small else rng.choice([12, 16])
        per_sample_s = rng.uniform(0.001, 0.02) / gpus**0.5
        cand = candidate(
            f"u{j}.{gpus}x",
            gpus=gpus,
            max_batch=max_batch,
            per_sample_s=per_sample_s,
            price=rng.uniform(0.2, 4.0) * gpus,
            cap=rng.randint(2, 6) if small else rng.randint(1, 3),
            network_gbps=rng.choice([5.0, 25.0]),
        )
        segments = 3 if small else rng.choice([3, 11])
        cands.append(replace(cand, profile=_bent_profile(cand.profile, segments=segments, rng=rng)))
    cands.sort(key=lambda c: c.name)
    constraints = Constraints(
        global_batch=rng.choice([6, 8, 12, 16, 24]),
        iterations=100,
        objective=rng.choice(list(Objective)),
        time_limit_s=rng.choice([None, rng.uniform(1.0, 30.0)]),
        budget_usd=rng.choice([None, rng.uniform(0.0005, 0.3)]),
    )
    return Problem(tuple(cands), constraints, rng.choice(list(BatchPolicy)))


def _bent_profile(base: ModelProfile, *, segments: int, rng: random.Random) -> ModelProfile:
    """`base` with forward and backward curves of up to `segments` pieces through its largest batch, each
    breakpoint moved off the line by up to ±8 % (a CPU knee, a cache step): not convex, not concave."""
    from dataclasses import replace

    top = base.max_batch
    points = sorted({1 + round(i * (top - 1) / segments) for i in range(segments + 1)})

    def bent(curve: ComputeCurve) -> ComputeCurve:
        return ComputeCurve(tuple(points), tuple(curve.time_s(b) * rng.uniform(0.92, 1.08) for b in points))

    return replace(base, forward=bent(base.forward), backward=bent(base.backward))


def make_spread_problem(seed: int) -> Problem:
    """A user's own model as `make_user_problem`, with uncertain compute: most types estimated (an
    estimate's spread of 0.05–0.3) or stating a compute spread, some measured without one, and a confidence
    of 0.6, 0.75, 0.9 or 0.99 (Φ⁻¹ below and above 1), so that limits are met at a quantile well above the
    prediction; gradients of 1/100 to all of `make_user_problem`'s and straggler spreads of 0–4 %, so that
    many fleets are compute-bound, where the quantile's bound from compute is tight. The limits are left
    to the test (no limit here)."""
    from dataclasses import replace

    from srift.domain.profile import EstimateInfo

    rng = random.Random(40_000 + seed)
    base = make_user_problem(seed)
    shrink = rng.choice([1.0, 0.1, 0.01])
    cv = rng.choice([0.0, 0.01, 0.04])
    cands = []
    for cand in base.candidates:
        kind = rng.random()
        layers = tuple(replace(x, grad_bytes=max(int(x.grad_bytes * shrink), 1)) for x in cand.profile.layers)
        profile = replace(cand.profile, layers=layers, straggler_cv=cv)
        if kind < 0.6:
            estimate = EstimateInfo(method="scaled", spread=rng.uniform(0.05, 0.3), calibration="test")
            profile = replace(profile, estimate=estimate)
        elif kind < 0.8:
            profile = replace(profile, extra={"compute_spread": rng.uniform(0.05, 0.3)})
        cands.append(replace(cand, profile=profile))
    constraints = replace(
        base.constraints,
        time_limit_s=None,
        budget_usd=None,
        confidence=rng.choice([0.6, 0.75, 0.9, 0.99]),
    )
    return Problem(tuple(cands), constraints, base.batch_policy)
