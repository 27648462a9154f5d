"""Reading a stored idle-compute measurement (older profiles); per-parameter layers of big modules."""

from __future__ import annotations

from typing import Any

import pytest
from torch import nn

from srift.domain import ModelProfile
from srift.errors import InvalidInput
from srift.profiling.bench import trainable_layers
from srift.sim.layers import bucket_groups, bucketed


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
        {"gaps_s": [0.1, 0.01], "ratio": [0.9, 0.6]},
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
