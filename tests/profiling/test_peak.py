"""The training memory model against real training steps: the predicted peak of a step with Adam matches
the measured one within 10 % for the shipped models at three batches (CPU, live tensor storage)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from srift.domain.memory import Optimizer, profile_memory, training_memory
from srift.domain.profile import ModelProfile
from srift.profiling import testmodels
from srift.profiling.bench import build_bench, call_model, default_loss
from srift.profiling.peak import LiveStorage, StepPeak, fit_activations, gradient_bytes, step_peak

SHIPPED = ("cnn", "wide_mlp", "transformer")
"""srift.validation.matrix.MODELS: the models `srift validate` runs."""
FIT_BATCHES = (4, 8)
CHECK_BATCHES = (2, 12, 24)


def _adam_step_peak(model: nn.Module, make_input: Callable[[int], Any], batch: int) -> int:
    """Bytes in use at the peak of the second Adam iteration: parameters and state held before it, plus the
    live storage created during zero_grad, forward, backward and the step."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-6)

    def iteration() -> None:
        optimizer.zero_grad(set_to_none=True)
        default_loss(call_model(model, make_input(batch))).backward()  # type: ignore[no-untyped-call]
        optimizer.step()

    iteration()
    held = sum(p.numel() * p.element_size() for p in model.parameters())
    held += sum(
        v.numel() * v.element_size()
        for state in optimizer.state.values()
        for v in state.values()
        if isinstance(v, torch.Tensor) and v.dim() > 0
    )
    optimizer.zero_grad(set_to_none=True)
    with LiveStorage() as live:
        iteration()
    return held + live.peak


@pytest.mark.parametrize("name", SHIPPED)
def test_predicted_peak_is_within_ten_percent_at_three_batches(name: str) -> None:
    factory, make_input = getattr(testmodels, name), getattr(testmodels, f"{name}_input")
    bench = build_bench(factory, make_input, None, torch.device("cpu"))
    points = [step_peak(bench, bench.inputs(b), b) for b in FIT_BATCHES]
    params = [p for p in bench.model.parameters() if p.requires_grad]
    memory = training_memory(
        parameter_bytes=gradient_bytes(bench),
        activation_bytes=fit_activations(points, gradient_bytes=gradient_bytes(bench)),
        optimizer=Optimizer.ADAM,
        cuda=False,
        distributed=False,
        largest_parameter_bytes=max(p.numel() * p.element_size() for p in params),
    )
    for batch in CHECK_BATCHES:
        measured = _adam_step_peak(bench.model, make_input, batch)
        predicted = memory.peak_bytes(batch)
        assert predicted == pytest.approx(measured, rel=0.10), (name, batch, predicted, measured)


def test_the_activation_line_goes_through_two_points_and_least_squares_through_more() -> None:
    """Peaks 10 + 3 at batch 1 and 10 + 7 at batch 3 with 10 bytes of gradients: activations 1 + 2·b."""
    line = fit_activations([StepPeak(1, 13), StepPeak(3, 17)], gradient_bytes=10)
    assert (line.fixed, line.per_sample) == (1.0, 2.0)
    more = fit_activations([StepPeak(1, 13), StepPeak(2, 15), StepPeak(3, 17)], gradient_bytes=10)
    assert (more.fixed, more.per_sample) == pytest.approx((1.0, 2.0))
    with pytest.raises(ValueError):
        fit_activations([StepPeak(2, 13), StepPeak(2, 17)], gradient_bytes=10)


def test_a_cpu_profile_records_its_training_memory(sequential_profile: ModelProfile) -> None:
    """Breakpoints 1, 3, 5, 8: the line through 3 and 5, checked at 8 within 10 %; the plan side reads it."""
    memory = sequential_profile.extra["training_memory"]
    assert memory["method"] == "cpu-live-storage"
    assert [p["batch"] for p in memory["points"]] == [3, 5]
    assert memory["check"]["batch"] == 8 and abs(memory["check"]["error"]) < 0.10
    model = profile_memory(sequential_profile, cuda=False, distributed=False)
    assert model is not None and model.parameter_bytes == sequential_profile.extra["trainable_bytes"]
    assert model.optimizer is Optimizer.ADAM
