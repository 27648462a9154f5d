"""The search space: market rule, availability caps, batch options per policy, reachability."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srift.domain import Constraints, Market, MarketChoice, Objective
from srift.errors import Infeasible, InvalidInput, NotFound
from srift.optimize.space import BatchPolicy, Problem, build_candidates, is_pow2, reachable

from .helpers import all_configs, candidate, instance, offer, profile
from .problems import make_problem

T4 = instance("g4dn.xlarge", gpus=1, gpu_model="T4")
T4x4 = instance("g4dn.12xlarge", gpus=4, gpu_model="T4")
V100 = instance("p3.2xlarge", gpus=1, gpu_model="V100")
PROFILES = [
    profile("Tesla T4", max_batch=32, per_sample_s=0.01),
    profile("V100", max_batch=64, per_sample_s=0.004),
]


def _build(offers, **kw):  # type: ignore[no-untyped-def]
    args = {"profiles": PROFILES, "market": MarketChoice.ANY, "availability": None, "default_cap": 8}
    args.update(kw)
    return build_candidates(offers=offers, **args)


def test_market_rule_keeps_the_cheaper_market_and_spot_on_ties() -> None:
    cands, _ = _build(
        [offer(T4, 0.5, Market.ON_DEMAND), offer(T4, 0.2, Market.SPOT), offer(V100, 3.06, Market.ON_DEMAND)]
    )
    assert [(c.name, c.market) for c in cands] == [
        ("g4dn.xlarge", Market.SPOT),
        ("p3.2xlarge", Market.ON_DEMAND),
    ]
    tie, _ = _build([offer(T4, 0.5, Market.ON_DEMAND), offer(T4, 0.5, Market.SPOT)])
    assert tie[0].market is Market.SPOT
    cheap_od, _ = _build([offer(T4, 0.1, Market.ON_DEMAND), offer(T4, 0.2, Market.SPOT)])
    assert cheap_od[0].market is Market.ON_DEMAND
    only_spot, _ = _build(
        [offer(T4, 0.1, Market.ON_DEMAND), offer(T4, 0.2, Market.SPOT)], market=MarketChoice.SPOT
    )
    assert only_spot[0].market is Market.SPOT and only_spot[0].offer.price_usd_per_hr == 0.2


def test_availability_caps_and_exclusions() -> None:
    offers = [offer(T4, 0.2), offer(T4x4, 1.2), offer(V100, 0.9)]
    cands, _ = _build(offers, availability={"g4dn.xlarge": 3, "p3.2xlarge": 0})
    assert [(c.name, c.cap) for c in cands] == [("g4dn.xlarge", 3)]
    all_types, _ = _build(offers)
    assert [(c.name, c.cap) for c in all_types] == [
        ("g4dn.12xlarge", 8),
        ("g4dn.xlarge", 8),
        ("p3.2xlarge", 8),
    ]
    kept, notes = _build(offers, excluded=["g4dn.xlarge"])
    assert "g4dn.xlarge" not in [c.name for c in kept]
    assert any("g4dn.xlarge" in n for n in notes)


def test_unknown_or_unprofiled_type_in_availability_names_the_field() -> None:
    with pytest.raises(NotFound) as err:
        _build([offer(T4, 0.2)], availability={"g4dn.xlarg": 2})
    assert err.value.field == "availability.g4dn.xlarg"
    assert "g4dn.xlarge" in err.value.hint
    a100 = instance("p4d.24xlarge", gpus=8, gpu_model="A100")
    with pytest.raises(InvalidInput) as err2:
        _build([offer(a100, 10.0)], availability={"p4d.24xlarge": 1})
    assert err2.value.field == "availability.p4d.24xlarge"
    with pytest.raises(InvalidInput) as err3:
        _build([offer(T4, 0.2)], availability={"g4dn.xlarge": -1})
    assert err3.value.field == "availability.g4dn.xlarge"


@pytest.mark.parametrize("availability", [{}, {"g4dn.xlarge": 0}, {"g4dn.xlarge": 0, "p3.2xlarge": 0}])
def test_availability_that_allows_no_vm_says_so(availability: dict[str, int]) -> None:
    """Every count 0 (or nothing listed) left no candidate, and the plan said no offer matched the profiles'
    accelerators, though both types match one: the answer (409: the request is valid, no fleet meets it)
    names `availability` and what allows a VM."""
    with pytest.raises(Infeasible) as err:
        _build([offer(T4, 0.2), offer(V100, 0.9)], availability=availability)
    assert err.value.field == "availability"
    assert "allows no VM" in err.value.detail and "count of 1 or more" in err.value.hint


def test_batch_options_respect_devices_and_max_batch() -> None:
    cand = candidate("a", gpus=4, max_batch=16, per_sample_s=0.01, price=1.0, cap=2)
    assert cand.min_vm_batch == 4 and cand.max_vm_batch == 64
    assert cand.batch_options(BatchPolicy.POW2) == (4, 8, 16, 32, 64)
    assert cand.batch_options(BatchPolicy.ANY) == tuple(range(4, 65, 4))
    assert cand.final_allowed(36, BatchPolicy.POW2_SPLIT) and not cand.final_allowed(36, BatchPolicy.POW2)
    assert not cand.final_allowed(3, BatchPolicy.ANY) and not cand.final_allowed(68, BatchPolicy.ANY)
    assert not any(cand.final_allowed(b, policy) for b in (26, 33, 62) for policy in BatchPolicy)


def test_split_group_is_the_last_type_present() -> None:
    a = candidate("a", gpus=1, max_batch=64, per_sample_s=0.01, price=1.0, cap=4)
    b = candidate("b", gpus=1, max_batch=64, per_sample_s=0.01, price=1.0, cap=4)
    p = Problem((a, b), Constraints(100, 10, Objective.MIN_COST))
    assert p.in_space(((0, 1, 64), (1, 1, 36)))
    assert not p.in_space(((0, 1, 36), (1, 1, 64)))
    assert p.in_space(((0, 2, 50),))
    assert not p.in_space(((0, 1, 64), (0, 1, 36)))
    assert not p.in_space(((0, 5, 20),))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_reachable_agrees_with_brute_force(seed: int) -> None:
    problem = make_problem(seed)
    assert reachable(problem) == bool(all_configs(problem))


def test_reachable_handles_large_batches_quickly() -> None:
    a = candidate("a", gpus=1, max_batch=1000, per_sample_s=0.01, price=1.0, cap=300)
    b = candidate("b", gpus=1, max_batch=999, per_sample_s=0.01, price=1.0, cap=300)
    prime = 262_139
    assert reachable(Problem((a, b), Constraints(prime, 10, Objective.MIN_COST)))
    assert not reachable(Problem((a, b), Constraints(prime, 10, Objective.MIN_COST), BatchPolicy.POW2))
    assert all(is_pow2(x) for x in a.batch_options(BatchPolicy.POW2))


def test_runs_of_one_accelerator_are_matched_once_and_the_first_is_used() -> None:
    """A plan by model passes every stored run of the model, most of one accelerator: the first profile a
    type matches is used, and each accelerator name is tried once per type, however many runs carry it."""
    from unittest.mock import patch

    from srift.domain import InstanceType

    runs = [profile("Tesla T4", max_batch=32, per_sample_s=0.01 * (1 + k / 100)) for k in range(50)]
    offers = [offer(T4, 0.2), offer(V100, 0.9)]
    matches = InstanceType.matches_accelerator
    with patch.object(InstanceType, "matches_accelerator", autospec=True, side_effect=matches) as spy:
        one, _ = _build(offers, profiles=[runs[0], PROFILES[1]])
        tried_with_one = spy.call_count
        many, _ = _build(offers, profiles=[*runs, PROFILES[1]])
    assert [(c.name, c.profile) for c in many] == [(c.name, c.profile) for c in one]
    assert next(c for c in many if c.name == "g4dn.xlarge").profile is runs[0]
    # each build: g4dn.xlarge tries Tesla T4; p3.2xlarge tries Tesla T4, then V100
    assert spy.call_count - tried_with_one == tried_with_one == 3
