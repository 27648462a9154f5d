"""profile_model on real torch models: readiness order, gradient bytes, exec_prob, memory budget, errors."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
import torch
from torch import nn

from srift.domain.profile import ModelProfile
from srift.domain.profile_document import read_profile
from srift.errors import EnvironmentProblem, Infeasible, InvalidInput
from srift.profiling import memory, profile_model, testmodels
from srift.profiling.bench import trainable_bytes
from srift.profiling.curves import fit_curve, mape, pool_curve_samples
from srift.profiling.profiler import sample_curve_points
from srift.profiling.search import PREDICTION_MARGIN

QUICK: dict[str, Any] = {"repeats": 2, "warmup": 1, "iterations": 6, "threads": 1}


def _profile(name: str, **kwargs: Any) -> ModelProfile:
    options = {**QUICK, "max_batch": 16, **kwargs}
    return profile_model(getattr(testmodels, name), getattr(testmodels, f"{name}_input"), **options)


def test_sequential_layers_become_ready_from_last_to_first(sequential_profile: ModelProfile) -> None:
    profile = sequential_profile
    by_name = {layer.name: layer for layer in profile.layers}
    order = [str(i) for i in range(10, -1, -2)]
    assert list(by_name) == order
    fracs = [by_name[n].ready_frac for n in order]
    assert fracs == sorted(fracs)
    assert fracs[0] < fracs[-1]
    assert all(0.0 <= f <= 1.0 for f in fracs)
    assert all(layer.exec_prob == 1.0 for layer in profile.layers)


@functools.cache
def _small_profile(name: str) -> ModelProfile:
    """`name` profiled at batches up to 4, once per process: two tests read the tied model's (a frozen
    ModelProfile)."""
    return _profile(name, max_batch=4)


@pytest.mark.parametrize("name", ["sequential", "tied", "conditional"])
def test_gradient_bytes_sum_to_the_trainable_parameter_bytes_exactly(name: str) -> None:
    profile = _small_profile(name)
    model = getattr(testmodels, name)()
    assert profile.total_grad_bytes == trainable_bytes(model)
    assert profile.total_grad_bytes == sum(p.numel() * p.element_size() for p in model.parameters())


def test_tied_weights_are_counted_once() -> None:
    profile = _small_profile("tied")
    model = testmodels.tied()
    naive = sum(p.numel() * p.element_size() for m in model.modules() for p in m.parameters(recurse=False))
    assert profile.total_grad_bytes < naive
    assert {layer.name for layer in profile.layers} == {"embed", "mix"}


def test_frozen_parameters_are_not_counted() -> None:
    def half_frozen() -> nn.Module:
        model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
        for p in model[0].parameters():
            p.requires_grad_(False)
        return model

    profile = profile_model(half_frozen, lambda b: torch.randn(b, 8), max_batch=4, **QUICK)
    assert [layer.name for layer in profile.layers] == ["2"]
    assert profile.total_grad_bytes == (8 * 2 + 2) * 4


def test_conditional_branches_get_execution_probabilities() -> None:
    profile = _profile("conditional", iterations=20)
    prob = {layer.name: layer.exec_prob for layer in profile.layers}
    assert prob["trunk"] == 1.0 and prob["head"] == 1.0
    assert 0.0 < prob["left"] < 1.0 and 0.0 < prob["right"] < 1.0
    assert prob["left"] + prob["right"] == pytest.approx(1.0)


def test_profile_document_round_trips_and_records_provenance() -> None:
    seen: list[tuple[str, float]] = []
    profile = _profile("cnn", progress=lambda stage, fraction: seen.append((stage, fraction)))
    assert profile.max_batch == 16
    assert profile.extra["paper_breakpoints"] == [1, 5, 11, 16]
    assert set(profile.forward.batches) >= {1, 5, 11, 16}
    assert profile.forward.batches == profile.backward.batches
    split = {c["batch"] for c in profile.extra["bend_checks"] if c["split"]}
    assert set(profile.forward.batches) == {1, 5, 11, 16} | split
    assert profile.extra["measured"]["batches"] == list(profile.forward.batches)
    assert all(t > 0 for t in profile.forward.times_s + profile.backward.times_s)
    assert profile.accelerator.startswith("cpu:") and profile.accelerator.endswith(":1t")
    assert profile.threads == 1 and profile.device == "cpu"
    assert profile.torch_version == torch.__version__
    assert profile.created_at.endswith("+00:00")
    assert profile.model == "cnn"
    assert profile.extra["max_batch_limited_by"] == "cap"
    assert profile.straggler_cv >= 0
    again = read_profile(json.loads(json.dumps(profile.to_dict())))
    assert again == profile
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert {s for s, _ in seen} >= {"check", "max batch", "timing", "readiness", "done"}


def test_the_paper_curve_keeps_exactly_four_breakpoints() -> None:
    """No midpoint is checked or timed (bend_checks None, two samples a point), whatever the model."""
    profile = _profile("sequential", max_batch=30, refine=False)
    assert profile.forward.batches == (1, 10, 20, 30) == profile.backward.batches
    assert profile.extra["bend_checks"] is None
    assert [len(ts) for ts in profile.extra["measured"]["forward_s"]] == [2] * 4


def test_a_bending_segment_is_split_where_it_bends() -> None:
    """wide_mlp on one core: batch 1 runs matrix-vector kernels, batches 2..~40 are memory-bound GEMMs at
    nearly constant time, larger ones compute-bound; the straight segment 1 → 43 misses batch 7 (its
    geometric midpoint) by about 40 % (0.41–0.43 in four runs on a 2-core host; with the cap at 256,
    1 → 85 missed batch 9 by 10–50 %), above the 8 % tolerance, so refinement splits there. In one
    clean-clone CI run (cap 256) the sign flipped (−41 %, noise 18 %); the split is what is asserted. The cap
    is 128, not 256: the same bend, at two thirds of the time."""
    seen: list[float] = []
    profile = _profile(
        "wide_mlp",
        max_batch=128,
        repeats=5,
        clock="thread",
        progress=lambda _, fraction: seen.append(fraction),
    )
    assert seen == sorted(seen), "the progress bar ran backwards over the refinement rounds"
    checks = profile.extra["bend_checks"]
    assert [(c["batch"], c["segment"]) for c in checks[:3]] == [
        (7, [1, 43]),
        (60, [43, 85]),
        (104, [85, 128]),
    ]
    assert 3 <= len(checks) <= 9
    split = [c for c in checks if c["split"]]
    assert checks[0]["split"] and abs(checks[0]["deviation"]) > 0.08, checks
    assert all(abs(c["deviation"]) > 0.08 for c in split)
    assert set(profile.forward.batches) == {1, 43, 85, 128} | {c["batch"] for c in split}
    assert all(len(ts) >= 3 for ts in profile.extra["measured"]["forward_s"])


def test_threads_are_restored_and_names_can_be_given() -> None:
    before = torch.get_num_threads()
    profile = _profile("sequential", max_batch=4, threads=1, accelerator="c5.large", model_name="seq")
    assert torch.get_num_threads() == before
    assert profile.accelerator == "c5.large" and profile.model == "seq"


def test_memory_budget_limits_the_largest_batch() -> None:
    budget = 8 * 2**20
    profile = _profile(
        "sequential", max_batch=4096, memory_budget_bytes=budget, iterations=2, repeats=1, warmup=0
    )
    probes = {p["batch"]: p for p in profile.extra["memory"]["probes"]}
    assert profile.extra["memory"]["method"] == "rss-peak"
    assert 1 <= profile.max_batch < 4096
    assert profile.extra["max_batch_limited_by"] == "memory"
    assert probes[profile.max_batch]["fits"] and probes[profile.max_batch]["peak_bytes"] <= budget
    assert not probes[profile.max_batch + 1]["fits"] and probes[profile.max_batch + 1]["peak_bytes"] > budget
    assert profile.extra["trainable_bytes"] < budget


def test_batches_that_would_exhaust_free_memory_are_not_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    free = 44 * 2**20
    monkeypatch.setattr(memory, "free_bytes", lambda: free)
    profile = _profile(
        "wide_mlp", max_batch=2048, memory_budget_bytes=36 * 2**20, iterations=2, repeats=1, warmup=0
    )
    probes = profile.extra["memory"]["probes"]
    hard_limit = profile.extra["memory"]["hard_limit_bytes"]
    assert hard_limit == int(free * memory.HARD_LIMIT_FRACTION)
    skipped = [p for p in probes if p["peak_bytes"] is None]
    assert skipped and all(
        p["predicted_bytes"] * PREDICTION_MARGIN > hard_limit and not p["fits"] for p in skipped
    )
    assert max(p["peak_bytes"] for p in probes if p["peak_bytes"] is not None) < 1.5 * hard_limit


def test_a_budget_below_one_sample_is_infeasible() -> None:
    with pytest.raises(Infeasible) as caught:
        _profile("wide_mlp", memory_budget_bytes=1024)
    assert caught.value.field == "memory_budget_bytes"


def test_curve_predicts_direct_measurements() -> None:
    """Guard of the ≤ 5 % acceptance figure (benchmarks/profile_curves.py) with looser bounds, since the
    test machine is shared and often overloaded: both sides use the thread CPU clock, the direct session is
    retried once, the curve through that session's own breakpoints must predict its other batches within
    25 %, and the profile's curve (measured earlier, so machine drift adds to it) within 50 %."""
    profile = _profile("cnn", max_batch=48, repeats=5, warmup=2, iterations=5, clock="thread")
    assert profile.extra["clock"] == "thread"
    points = list(profile.forward.batches)
    batches = [5, 8, 23, 31, 39, 44]
    from_profile = [profile.compute_s(b) for b in batches]
    errors: list[tuple[float, float]] = []
    for _ in range(2):
        direct = sample_curve_points(
            testmodels.cnn, testmodels.cnn_input, points + batches, threads=1, repeats=5, clock="thread"
        ).median_times_s()
        forward = fit_curve(points, [direct[b][0] for b in points])
        backward = fit_curve(points, [direct[b][1] for b in points])
        measured = [direct[b][0] + direct[b][1] for b in batches]
        curve = [forward.time_s(b) + backward.time_s(b) for b in batches]
        errors.append((mape(curve, measured), mape(from_profile, measured)))
        if errors[-1][0] <= 25.0 and errors[-1][1] <= 50.0:
            break
    assert min(e[0] for e in errors) <= 25.0, errors
    assert min(e[1] for e in errors) <= 50.0, errors


def test_a_further_timing_pass_times_the_profile_breakpoints_and_pools_into_it(
    sequential_profile: ModelProfile,
) -> None:
    profile = sequential_profile
    points = profile.extra["measured"]["batches"]
    samples = sample_curve_points(
        testmodels.sequential, testmodels.sequential_input, points, threads=1, repeats=3, warmup=1
    )
    assert samples.batches == tuple(points)
    assert [len(ts) for ts in samples.forward_s] == [3] * len(points)
    assert all(t > 0 for ts in (*samples.forward_s, *samples.backward_s) for t in ts)
    pooled = pool_curve_samples(profile, [samples])
    own = [len(ts) for ts in profile.extra["measured"]["backward_s"]]
    assert all(n >= 2 for n in own)
    assert [len(ts) for ts in pooled.extra["measured"]["backward_s"]] == [n + 3 for n in own]
    assert pooled.compute_s(points[-1]) > 0
    with pytest.raises(InvalidInput, match="batches"):
        sample_curve_points(testmodels.sequential, testmodels.sequential_input, [0], repeats=1)


class NotAModel:
    pass


def _raises() -> nn.Module:
    raise ValueError("weights file missing")


@pytest.mark.parametrize(
    ("model_factory", "input_factory", "loss_fn", "field", "needles"),
    [
        (
            _raises,
            testmodels.cnn_input,
            None,
            "model_factory",
            ["_raises", "ValueError: weights file missing"],
        ),
        (NotAModel, testmodels.cnn_input, None, "model_factory", ["NotAModel", "not a torch.nn.Module"]),
        (
            testmodels.cnn,
            testmodels.wide_mlp_input,
            None,
            "input_factory",
            ["wide_mlp_input", "RuntimeError"],
        ),
        (testmodels.cnn, lambda b: [1, 2, 3], None, "input_factory", ["<lambda>", "not a tensor"]),
        (testmodels.cnn, lambda: torch.zeros(1), None, "input_factory", ["<lambda>", "TypeError"]),
        (
            testmodels.cnn,
            lambda b: torch.randn(3, 3, 32, 32),
            None,
            "input_factory",
            ["elements for batch 2"],
        ),
        (testmodels.cnn, testmodels.cnn_input, lambda out: out, "loss_fn", ["<lambda>", "not a scalar"]),
        (testmodels.cnn, testmodels.cnn_input, lambda out: 1 / 0, "loss_fn", ["ZeroDivisionError"]),
    ],
)
def test_bad_factories_name_the_culprit_and_the_cause(
    model_factory: Any, input_factory: Any, loss_fn: Any, field: str, needles: list[str]
) -> None:
    with pytest.raises(InvalidInput) as caught:
        profile_model(model_factory, input_factory, loss_fn=loss_fn, max_batch=4, **QUICK)
    assert caught.value.field == field
    for needle in needles:
        assert needle in str(caught.value)
    assert "To fix:" in str(caught.value)


def test_a_model_without_trainable_parameters_is_rejected() -> None:
    def frozen() -> nn.Module:
        return nn.Sequential(nn.Linear(4, 4)).requires_grad_(False)

    with pytest.raises(InvalidInput) as caught:
        profile_model(frozen, lambda b: torch.randn(b, 4, requires_grad=True), max_batch=4, **QUICK)
    assert caught.value.field == "model_factory" and "no trainable parameters" in str(caught.value)


def test_the_thread_clock_needs_one_cpu_thread() -> None:
    with pytest.raises(InvalidInput) as caught:
        _profile("sequential", threads=2, clock="thread")
    assert caught.value.field == "clock" and "--threads 1" in str(caught.value)
    with pytest.raises(InvalidInput) as caught:
        _profile("sequential", clock="sundial")
    assert caught.value.field == "clock"


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "gpu0"])
def test_unknown_devices_are_invalid(device: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        _profile("sequential", device=device)
    assert caught.value.field == "device"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_a_gpu_is_an_environment_problem() -> None:
    with pytest.raises(EnvironmentProblem) as caught:
        _profile("sequential", device="cuda:0")
    assert caught.value.field == "device"
