"""The event engine alone: ordering, cancellation, run(until); tiny timelines."""

from __future__ import annotations

import math

import pytest

from srift.sim.engine import Engine


def test_one_transfer_timeline() -> None:
    engine = Engine()
    log: list[tuple[float, str, str]] = []

    def start() -> None:
        log.append((engine.now, "start", "fc1"))
        engine.schedule(0.8, lambda: log.append((engine.now, "done", "fc1")))

    engine.schedule(0.0, start)
    engine.run()
    assert log == [(0.0, "start", "fc1"), (0.8, "done", "fc1")]


def test_order_is_time_then_priority_then_scheduling_order() -> None:
    engine = Engine()
    log: list[str] = []
    engine.schedule_at(1.0, lambda: log.append("b"), priority=1)
    engine.schedule_at(1.0, lambda: log.append("a"), priority=0)
    engine.schedule_at(1.0, lambda: log.append("c"), priority=1)
    engine.schedule_at(0.5, lambda: log.append("first"), priority=9)
    engine.run()
    assert log == ["first", "a", "b", "c"]
    assert engine.now == 1.0


def test_cancel_is_lazy_and_skipped() -> None:
    engine = Engine()
    log: list[tuple[float, str]] = []
    late = engine.schedule(2.0, lambda: log.append((engine.now, "late")))
    engine.schedule(1.0, lambda: (engine.cancel(late), log.append((engine.now, "cancel")))[1])
    engine.schedule(3.0, lambda: log.append((engine.now, "end")))
    assert len(engine) == 3
    engine.run()
    assert log == [(1.0, "cancel"), (3.0, "end")]
    assert engine.step() is False


def test_reschedule_after_cancel_models_a_changing_finish_time() -> None:
    engine = Engine()
    log: list[tuple[float, str]] = []
    finish = engine.schedule(4.0, lambda: log.append((engine.now, "done@4")))

    def slow_down() -> None:
        engine.cancel(finish)
        engine.schedule(3.0, lambda: log.append((engine.now, "done@5")))

    engine.schedule(2.0, slow_down)
    engine.run()
    assert log == [(5.0, "done@5")]


def test_run_until_stops_the_clock_and_keeps_later_events() -> None:
    engine = Engine()
    log: list[float] = []
    for t in (1.0, 2.0, 3.0):
        engine.schedule_at(t, lambda: log.append(engine.now))
    engine.run(until=2.0)
    assert log == [1.0, 2.0]
    assert engine.now == 2.0
    assert engine.peek() == 3.0
    engine.run()
    assert log == [1.0, 2.0, 3.0]
    assert engine.peek() == math.inf


def test_rejects_the_past_and_negative_delays() -> None:
    engine = Engine(start=5.0)
    with pytest.raises(ValueError, match=r"clock is at 5\.0"):
        engine.schedule_at(4.0, lambda: None)
    with pytest.raises(ValueError, match="delay"):
        engine.schedule(-1.0, lambda: None)
    with pytest.raises(ValueError, match="before now"):
        engine.run(until=1.0)
    assert len(engine) == 0
