"""The profiler's idle-compute measurement and its per-parameter layers of multi-parameter modules."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch
from torch import nn

from srift.domain import ModelProfile
from srift.errors import InvalidInput
from srift.profiling import testmodels
from srift.profiling.profiler import IDLE_GAPS_S, _build_bench, _idle_compute, trainable_layers
from srift.sim.layers import bucket_groups, bucketed


def test_idle_ratios_from_a_hand_made_clock() -> None:
    """Each step reads the clock at its start and end. One untimed step (9 s), then per round a step back to
    back (10 s) and one after each gap: 8 s after 5 ms idle, 6 s after 10 ms, 5 s after 30 ms. Ratios
    0.8, 0.6, 0.5; every gap slept once per round, in order."""
    bench = _build_bench(testmodels.sequential, testmodels.sequential_input, None, torch.device("cpu"))
    steps = [9.0] + [10.0, 8.0, 6.0, 5.0] * 3
    clock = itertools.accumulate(itertools.chain.from_iterable((0.0, s) for s in steps))
    bench.now = lambda: float(next(clock))
    slept: list[float] = []
    got = _idle_compute(bench, batch=2, repeats=3, sleep=slept.append)
    assert got["gaps_s"] == list(IDLE_GAPS_S) == [0.005, 0.01, 0.03]
    assert got["ratio"] == pytest.approx([0.8, 0.6, 0.5])
    assert got["batch"] == 2
    assert slept == list(IDLE_GAPS_S) * 3


class _Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(4, 8, num_layers=2)
        self.head = nn.Linear(8, 3)


def test_a_module_with_more_than_two_parameters_is_one_layer_per_parameter() -> None:
    layers = trainable_layers(_Recurrent())
    names = [x.name for x in layers]
    assert names == [
        *(f"rnn.{k}_l{i}" for i in (0, 1) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")),
        "head",
    ]
    assert [x.grad_bytes for x in layers[:4]] == [24 * 4 * 4, 24 * 8 * 4, 24 * 4, 24 * 4]
    assert layers[-1].grad_bytes == (8 * 3 + 3) * 4 and len(layers[-1].params) == 2


def test_profile_carries_the_idle_measurement(sequential_profile: ModelProfile) -> None:
    result = sequential_profile
    idle = result.extra["idle_compute"]
    assert idle["gaps_s"] == list(IDLE_GAPS_S) and idle["batch"] == 3
    assert all(0.05 <= r <= 2.0 for r in idle["ratio"])
    again = ModelProfile.from_dict(result.to_dict())
    assert again.idle_compute_ratio(1.0) == idle["ratio"][-1]


def _doc(idle: Any) -> dict[str, Any]:
    return {
        "model": "toy",
        "accelerator": "cpu",
        "max_batch": 4,
        "forward": {"batches": [4], "times_s": [0.1]},
        "backward": {"batches": [4], "times_s": [0.2]},
        "layers": [{"name": "l0", "grad_bytes": 8, "ready_frac": 1.0, "exec_prob": 1.0}],
        "straggler_cv": 0.0,
        "extra": {"idle_compute": idle},
    }


def test_the_idle_ratio_is_linear_between_gaps_by_hand() -> None:
    # Gaps 0.1 s (0.8) and 0.5 s (0.5): at 0.25 s, 0.8 − 0.375·0.3 = 0.6875; at 0.05 s, halfway from 1 to
    # 0.8; beyond the last gap, the last ratio; nothing idle, 1.
    prof = ModelProfile.from_dict(_doc({"gaps_s": [0.1, 0.5], "ratio": [0.8, 0.5], "batch": 3}))
    assert prof.idle_compute_ratio(0.25) == pytest.approx(0.6875, abs=1e-12)
    assert prof.idle_compute_ratio(0.05) == pytest.approx(0.9, abs=1e-12)
    assert prof.idle_compute_ratio(2.0) == 0.5
    assert prof.idle_compute_ratio(0.0) == 1.0


@pytest.mark.parametrize(
    "bad",
    [
        {"gaps_s": [0.01], "ratio": [0.9, 0.6]},
        {"gaps_s": [0.01, 0.01], "ratio": [0.9, 0.6]},
        {"gaps_s": [0.01], "ratio": [0.0]},
        {"gaps_s": [-0.01], "ratio": [0.9]},
        [0.9],
    ],
)
def test_a_malformed_idle_measurement_is_refused_with_its_field(bad: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        ModelProfile.from_dict(_doc(bad))
    assert err.value.field == "extra.idle_compute"


def test_per_parameter_layers_give_ddps_buckets_by_hand() -> None:
    """A two-layer GRU (hidden 256) and its head, readiness as the profiler measured it on a small host.
    DDP's 1 MiB first bucket fills in ready order: head 10,280 + bias_hh_l1 3,072 + weight_hh_l1 786,432 +
    bias_ih_l1 3,072 = 802,856 < 1,048,576, + weight_ih_l1 786,432 = 1,589,288 ≥ 1 MiB: it closes there, at
    the readiness of weight_ih_l1 (0.61); the rest, 989,184 bytes, is the second bucket (ready at the end).
    The DDP trace of the same model (docs/validation.md, cause 7) shows buckets of 1.59 and 0.99 MB."""
    sizes = [
        ("head", 10280, 0.005),
        ("rnn.bias_hh_l1", 3072, 0.4316),
        ("rnn.weight_hh_l1", 786432, 0.4322),
        ("rnn.bias_ih_l1", 3072, 0.6131),
        ("rnn.weight_ih_l1", 786432, 0.6133),
        ("rnn.bias_hh_l0", 3072, 0.9882),
        ("rnn.weight_hh_l0", 786432, 0.9887),
        ("rnn.bias_ih_l0", 3072, 0.9904),
        ("rnn.weight_ih_l0", 196608, 0.9983),
    ]
    doc = _doc(None)
    doc["extra"] = {}
    doc["layers"] = [{"name": n, "grad_bytes": b, "ready_frac": r, "exec_prob": 1.0} for n, b, r in sizes]
    prof = ModelProfile.from_dict(doc)
    merged = bucketed(prof, bucket_groups(prof, cap_bytes=25 * 2**20))
    assert [(x.grad_bytes, x.ready_frac) for x in merged.layers] == [(1_589_288, 0.6133), (989_184, 0.9983)]
