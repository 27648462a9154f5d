"""A step that follows an idle wait (for the exchange) runs at the profile's measured idle ratio, by hand."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from srift.domain import ModelProfile
from srift.errors import InvalidInput
from srift.sim import simulate

from .kit import P3_2XL, flat, member, profile

# fw 0.1, bw 0.2; two VMs, flat 8 Gbit/s: a ring of 2 moves s bytes in 8s/8e9 s (as in test_loop_overhead).
# Layer 1: 0.1 GB ready at a quarter of backward, layer 2: 0.25 GB at its end. Unscaled: layer 1 ready at
# 0.15, reduced [0.15, 0.25]; layer 2 ready at 0.3, reduced [0.3, 0.55]; the iteration is 0.55 s, of which
# each VM computes 0.3 s and waits 0.25 s.
LAYERS = ((100_000_000, 0.25), (250_000_000, 1.0))


def _with(**extra: Any) -> ModelProfile:
    return replace(profile(layers=LAYERS), extra=extra)


def test_a_waiting_rank_computes_at_the_ratio_beyond_the_last_gap_by_hand() -> None:
    # Idle 0.25 s is beyond the last gap (0.1 s): ratio 0.6, above the CPU floor 1/4. fw 0.06, bw 0.12:
    # layer 1 ready at 0.09, moved by 0.19; layer 2 ready at 0.18, the link busy until 0.19, its 0.25 s
    # of transfer end at 0.44 (the link is shared work-conservingly in between).
    idle = {"gaps_s": [0.01, 0.1], "ratio": [0.9, 0.6]}
    est = simulate(
        [member(P3_2XL, 2, 64, _with(idle_compute=idle, loop_wall_per_cpu=4.0))], bandwidth=flat(8.0)
    )
    assert est.iteration_s == pytest.approx(0.44, abs=1e-9)
    assert est.breakdown.forward_s == pytest.approx(0.06, abs=1e-12)
    assert est.breakdown.backward_s == pytest.approx(0.12, abs=1e-12)
    # The optimizer step after the wait scales too: 0.04 s → 0.024 s after the exchange (idle still 0.25).
    stepped = replace(_with(idle_compute=idle, loop_wall_per_cpu=4.0), update_s=0.04)
    est = simulate([member(P3_2XL, 2, 64, stepped)], bandwidth=flat(8.0))
    assert est.iteration_s == pytest.approx(0.464, abs=1e-9)
    assert est.breakdown.update_s == pytest.approx(0.024, abs=1e-12)


def test_the_ratio_is_linear_between_gaps_by_hand() -> None:
    # Idle 0.25 between gaps 0.1 (0.8) and 0.5 (0.5): 0.8 − 0.375·0.3 = 0.6875. fw 0.06875, bw 0.1375:
    # layer 1 ready at 0.103125, reduced by 0.203125; layer 2 ready at 0.20625, reduced by 0.45625.
    idle = {"gaps_s": [0.1, 0.5], "ratio": [0.8, 0.5]}
    prof = _with(idle_compute=idle, loop_wall_per_cpu=4.0)
    assert prof.idle_compute_ratio(0.25) == pytest.approx(0.6875, abs=1e-12)
    assert prof.idle_compute_ratio(0.05) == pytest.approx(0.9, abs=1e-12)
    assert prof.idle_compute_ratio(0.0) == 1.0
    est = simulate([member(P3_2XL, 2, 64, prof)], bandwidth=flat(8.0))
    assert est.iteration_s == pytest.approx(0.45625, abs=1e-9)


def test_compute_never_runs_faster_than_its_cpu_time_by_hand() -> None:
    # Wall/CPU ratio 1.25: CPU time is 0.8 of compute, so the 0.6 ratio is held at 0.8. fw 0.08, bw 0.16:
    # layer 1 ready at 0.12, reduced by 0.22; layer 2 ready at 0.24, reduced by 0.49.
    idle = {"gaps_s": [0.01, 0.1], "ratio": [0.9, 0.6]}
    est = simulate(
        [member(P3_2XL, 2, 64, _with(idle_compute=idle, loop_wall_per_cpu=1.25))], bandwidth=flat(8.0)
    )
    assert est.iteration_s == pytest.approx(0.49, abs=1e-9)
    # No wall/CPU ratio measured: the floor is compute itself, nothing changes.
    plain = simulate([member(P3_2XL, 2, 64, _with(idle_compute=idle))], bandwidth=flat(8.0))
    assert plain.iteration_s == pytest.approx(0.55, abs=1e-9)


def test_one_vm_never_waits_and_unmeasured_changes_nothing() -> None:
    idle = {"gaps_s": [0.01, 0.1], "ratio": [0.9, 0.6]}
    one = simulate(
        [member(P3_2XL, 1, 64, _with(idle_compute=idle, loop_wall_per_cpu=4.0))], bandwidth=flat(8.0)
    )
    assert one.iteration_s == pytest.approx(0.3, abs=1e-12)
    two = simulate([member(P3_2XL, 2, 64, profile(layers=LAYERS))], bandwidth=flat(8.0))
    assert two.iteration_s == pytest.approx(0.55, abs=1e-9)


@pytest.mark.parametrize(
    "bad",
    [
        {"gaps_s": [0.01], "ratio": [0.9, 0.6]},
        {"gaps_s": [0.1, 0.01], "ratio": [0.9, 0.6]},
        {"gaps_s": [0.01], "ratio": [0.0]},
        {"gaps_s": [-0.01], "ratio": [0.9]},
        [0.9],
    ],
)
def test_a_malformed_measurement_is_refused_with_its_field(bad: Any) -> None:
    doc = _with().to_dict()
    doc["extra"] = {"idle_compute": bad}
    with pytest.raises(InvalidInput) as err:
        ModelProfile.from_dict(doc)
    assert err.value.field == "extra.idle_compute"
    good = {"gaps_s": [0.01, 0.1], "ratio": [0.9, 0.6], "batch": 16}
    doc["extra"] = {"idle_compute": good}
    assert ModelProfile.from_dict(doc).idle_compute_ratio(1.0) == 0.6
