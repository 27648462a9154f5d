"""Hand-computed exchange timelines (Srift eq. 2, max-min fair); fast simulations equal to the literal one."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srift.errors import EnvironmentProblem
from srift.sim.exchange import ExchangeResult, Stage, c_stage, exchange, exchange_reference

G = 1e9
Sim = Callable[..., ExchangeResult]
BOTH = pytest.mark.parametrize(
    "sim",
    [
        functools.partial(exchange, kernel="c"),
        functools.partial(exchange, kernel="python"),
        exchange_reference,
    ],
    ids=["c", "python", "reference"],
)


def test_c_kernel_is_built() -> None:
    """`make install` compiles the C stage kernel; without it plans fall back to the slower Python stage."""
    assert c_stage() is not None


def _timeline(log: Sequence[tuple[float, str, str, int]], names: str) -> list[tuple[float, str, str, str]]:
    return [(t, stage, kind, names[j]) for t, stage, kind, j in log]


def _close(a: list[tuple[float, str, str, str]], b: list[tuple[float, str, str, str]]) -> None:
    assert [x[1:] for x in a] == [x[1:] for x in b]
    assert [x[0] for x in a] == pytest.approx([x[0] for x in b], abs=1e-9)


@BOTH
def test_one_layer(sim: Sim) -> None:
    log: list[tuple[float, str, str, int]] = []
    net = Stage("network", rates_bps=(10 * G,), cap_bps=10 * G)
    result = sim([0.2], [8 * G], [0], [net], log=log)
    _close(_timeline(log, "A"), [(0.2, "network", "start", "A"), (1.0, "network", "done", "A")])
    assert result.end_s == pytest.approx(1.0, abs=1e-9)
    assert result.busy == (((0.2, pytest.approx(1.0, abs=1e-9)),),)


@BOTH
def test_two_layers_overlap_under_the_cap_at_their_own_rates(sim: Sim) -> None:
    # 3 + 4 Gbit/s < 10 cap: neither slows the other. A: 6 Gbit at 3 → 2.0. B: 2 Gbit at 4 from 1.0 → 1.5.
    log: list[tuple[float, str, str, int]] = []
    net = Stage("network", rates_bps=(3 * G, 4 * G), cap_bps=10 * G)
    result = sim([0.0, 1.0], [6 * G, 2 * G], [0, 1], [net], log=log)
    _close(
        _timeline(log, "AB"),
        [
            (0.0, "network", "start", "A"),
            (1.0, "network", "start", "B"),
            (1.5, "network", "done", "B"),
            (2.0, "network", "done", "A"),
        ],
    )
    assert result.finish_s[0] == pytest.approx((2.0, 1.5), abs=1e-9)


@BOTH
def test_cap_limited_fair_sharing_with_a_late_arrival(sim: Sim) -> None:
    # A: 16 Gbit at 8 alone. At 1.0 B (own 6) arrives: 8+6 ≥ cap 10, so each gets min(own, 10/2) = 5.
    # A has 8 left; B's 4 take 0.8 → B done 1.8; A then has 8-4 = 4 left at 8 alone → 2.3.
    log: list[tuple[float, str, str, int]] = []
    net = Stage("network", rates_bps=(8 * G, 6 * G), cap_bps=10 * G)
    result = sim([0.0, 1.0], [16 * G, 4 * G], [0, 1], [net], log=log)
    _close(
        _timeline(log, "AB"),
        [
            (0.0, "network", "start", "A"),
            (1.0, "network", "start", "B"),
            (1.8, "network", "done", "B"),
            (2.3, "network", "done", "A"),
        ],
    )
    assert result.end_s == pytest.approx(2.3, abs=1e-9)


@BOTH
def test_a_slow_transfer_keeps_its_own_rate_and_leaves_the_rest_of_the_cap(sim: Sim) -> None:
    # own 8 and 4, b_agg 12 ≥ cap 10; B's 4 is below an even split (5), so B keeps 4 and A gets the other 6
    # (max-min fair: the cap is never left idle while a transfer could use it). B (2 Gbit) done 0.5;
    # A has 10-3 = 7 left, alone at 8 → 0.875 more → 1.375.
    net = Stage("network", rates_bps=(8 * G, 4 * G), cap_bps=10 * G)
    result = sim([0.0, 0.0], [10 * G, 2 * G], [0, 1], [net])
    assert result.finish_s[0] == pytest.approx((1.375, 0.5), abs=1e-9)


@BOTH
def test_three_levels_of_water_filling(sim: Sim) -> None:
    # own 1, 3 and 10 (×2), cap 12: 1 < 12/4 keeps 1; 3 < 11/3 keeps 3; the two fast ones share 8 → 4 each.
    # C and D (4 Gbit each) done at 1.0, with A (own 1, 2 Gbit) 1 left and B (own 3, 6 Gbit) 3 left; then
    # 1 + 3 < cap: own rates, A done 2.0, B 2.0.
    net = Stage("network", rates_bps=(1 * G, 3 * G, 10 * G), cap_bps=12 * G)
    result = sim([0.0] * 4, [2 * G, 6 * G, 4 * G, 4 * G], [0, 1, 2, 2], [net])
    assert result.finish_s[0] == pytest.approx((2.0, 2.0, 1.0, 1.0), abs=1e-9)


@BOTH
def test_two_stages_in_tandem(sim: Sim) -> None:
    # Intra 40 Gbit/s each (cap 100: no sharing). A: 8 Gbit, intra 0→0.2; B: 2 Gbit, intra 0.1→0.15.
    # Network cap 10: B alone 0.15→0.2 (0.5 Gbit), then shares 5/5 with A: B's 1.5 left → 0.5.
    # A: 1.5 Gbit by 0.5, 6.5 left alone at 10 → 1.15.
    log: list[tuple[float, str, str, int]] = []
    intra = Stage("intra", rates_bps=(40 * G,), cap_bps=100 * G)
    net = Stage("network", rates_bps=(10 * G,), cap_bps=10 * G)
    result = sim([0.0, 0.1], [8 * G, 2 * G], [0, 0], [intra, net], log=log)
    _close(
        _timeline(log, "AB"),
        [
            (0.0, "intra", "start", "A"),
            (0.1, "intra", "start", "B"),
            (0.15, "intra", "done", "B"),
            (0.15, "network", "start", "B"),
            (0.2, "intra", "done", "A"),
            (0.2, "network", "start", "A"),
            (0.5, "network", "done", "B"),
            (1.15, "network", "done", "A"),
        ],
    )
    assert result.busy_after(1, 0.5) == pytest.approx(0.65, abs=1e-9)
    assert result.busy_after(0, 0.5) == 0.0
    assert result.busy_total() == pytest.approx(1.15, abs=1e-9)


def test_rejects_unsorted_and_empty_transfers() -> None:
    net = Stage("network", rates_bps=(1.0,), cap_bps=1.0)
    with pytest.raises(ValueError, match="sorted"):
        exchange([1.0, 0.0], [1.0, 1.0], [0, 0], [net])
    with pytest.raises(ValueError, match="bits > 0"):
        exchange([0.0], [0.0], [0], [net])
    assert exchange([], [], [], [net]).end_s == 0.0


def test_missing_c_kernel_falls_back_or_says_how_to_build_it(monkeypatch: pytest.MonkeyPatch) -> None:
    net = Stage("network", rates_bps=(10 * G,), cap_bps=10 * G)
    monkeypatch.setattr("srift.sim.exchange.c_stage", lambda: None)
    assert exchange([0.2], [8 * G], [0], [net]).end_s == pytest.approx(1.0, abs=1e-9)
    with pytest.raises(EnvironmentProblem, match="not built") as err:
        exchange([0.2], [8 * G], [0], [net], kernel="c")
    assert "C compiler" in err.value.hint


def test_c_kernel_checks_its_own_input() -> None:
    """The C kernel is also reached with checked=False, so it refuses bad input itself (no crash)."""
    run = c_stage()
    assert run is not None
    with pytest.raises(ValueError, match="sorted"):
        run([1.0, 0.0], [1.0, 1.0], [0, 0], [1.0], 1.0)
    with pytest.raises(ValueError, match="bits > 0"):
        run([0.0], [0.0], [0], [1.0], 1.0)
    with pytest.raises(ValueError, match="class index"):
        run([0.0], [1.0], [3], [1.0], 1.0)
    with pytest.raises(ValueError, match="one entry per transfer"):
        run([0.0, 1.0], [1.0], [0], [1.0], 1.0)
    with pytest.raises(ValueError, match="rates must be > 0"):
        run([0.0], [1.0], [0], [0.0], 1.0)
    with pytest.raises(ValueError, match="cap"):
        run([0.0], [1.0], [0], [1.0], 0.0)
    with pytest.raises(TypeError):
        run([0.0], ["x"], [0], [1.0], 1.0)
    assert run([], [], [], [1.0], 1.0) == ([], [])


transfers = st.lists(
    st.tuples(
        st.floats(0.0, 2.0, allow_subnormal=False),
        st.floats(0.01, 50.0, allow_subnormal=False),
        st.integers(0, 2),
    ),
    min_size=1,
    max_size=40,
)
rates = st.tuples(*(st.floats(0.5, 20.0) for _ in range(3)))


@settings(max_examples=60, deadline=None)
@given(
    transfers,
    rates,
    rates,
    st.floats(1.0, 40.0),
    st.floats(1.0, 40.0),
    st.booleans(),
    st.sampled_from([2, 12, 10**9]),
)
def test_fast_equals_reference(
    jobs: list[tuple[float, float, int]],
    rates_a: tuple[float, ...],
    rates_b: tuple[float, ...],
    cap_a: float,
    cap_b: float,
    two: bool,
    bulk_min: int,
) -> None:
    jobs.sort()
    ready, bits, klass = [j[0] for j in jobs], [j[1] for j in jobs], [j[2] for j in jobs]
    stages = [Stage("intra", rates_a, cap_a), Stage("network", rates_b, cap_b)][0 if two else 1 :]
    ref = exchange_reference(ready, bits, klass, stages)
    for kernel in ("python", "c"):
        fast = exchange(ready, bits, klass, stages, bulk_min=bulk_min, kernel=kernel)
        for f, r in zip(fast.finish_s, ref.finish_s, strict=True):
            assert f == pytest.approx(r, rel=1e-9, abs=1e-9), kernel
        assert fast.busy_total() == pytest.approx(ref.busy_total(), rel=1e-9, abs=1e-9), kernel
        assert fast.end_s >= max(ready)
