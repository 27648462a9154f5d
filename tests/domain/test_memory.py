"""The training memory model: its parts add up, by hand, per optimizer and precision; the largest batch."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from srift.domain.memory import (
    CUDA_CONTEXT_BYTES,
    MARGIN_FRACTION,
    NCCL_BUFFER_BYTES,
    Optimizer,
    Part,
    gpu_batch_limit,
    parse_optimizer,
    profile_memory,
    training_memory,
)
from srift.domain.profile import ComputeCurve, LayerGrad, ModelProfile
from srift.domain.structure import Affine
from srift.errors import InvalidInput

MIB = 2**20
P = 4_000_000
"""A model of one million fp32 parameters."""
ACT = Affine(1_000_000.0, 50_000.0)
"""1 MB of fixed activations and 50 kB per sample: 1.5 MB at batch 10."""
RESERVE = 426 * MIB + 688 * MIB


@pytest.mark.parametrize(
    ("optimizer", "state", "workspace"),
    [
        (Optimizer.SGD, 0, 0),
        (Optimizer.MOMENTUM, 4_000_000, 0),
        (Optimizer.ADAM, 8_000_000, 4_000_000),
        (Optimizer.ADAMW, 8_000_000, 4_000_000),
    ],
)
def test_fp32_parts_add_up_by_hand(optimizer: Optimizer, state: int, workspace: int) -> None:
    """params 4 MB, grads 4 MB, DDP buckets 4 MB, state 0/1/2 copies, reserve 426 + 688 MiB; at batch 10 the
    transient part is the activations' 1.5 MB, or Adam's 4 MB of foreach temporaries, whichever is larger."""
    mem = training_memory(parameter_bytes=P, activation_bytes=ACT, optimizer=optimizer)
    parts = mem.parts(10)
    assert parts == {
        Part.PARAMETERS: 4e6,
        Part.GRADIENTS: 4e6,
        Part.OPTIMIZER_STATE: float(state),
        Part.MASTER_WEIGHTS: 0.0,
        Part.DDP_BUCKETS: 4e6,
        Part.ACTIVATIONS: max(1.5e6, float(workspace)),
        Part.RESERVE: float(RESERVE),
    }
    assert mem.peak_bytes(10) == sum(parts.values()) == 12e6 + state + max(1.5e6, workspace) + RESERVE
    assert CUDA_CONTEXT_BYTES + NCCL_BUFFER_BYTES == RESERVE


def test_low_precision_weights_keep_an_fp32_master_copy_by_hand() -> None:
    """One million bf16 parameters (2 MB) under Adam: grads 2 MB, buckets 2 MB, master 4 MB, state 2 × 4 MB in
    fp32, foreach temporaries one fp32 copy (4 MB). At batch 100 the activations (6 MB) are larger."""
    mem = training_memory(
        parameter_bytes=2_000_000,
        activation_bytes=ACT,
        optimizer=Optimizer.ADAM,
        low_precision_weights=True,
        parameter_elements=1_000_000,
    )
    assert mem.master_weight_bytes == 4_000_000
    assert mem.optimizer_state_bytes == 8_000_000
    assert mem.update_workspace_bytes == 4_000_000
    assert mem.peak_bytes(100) == 2e6 + 2e6 + 8e6 + 4e6 + 2e6 + 6e6 + RESERVE
    assert mem.peak_bytes(10) == 2e6 + 2e6 + 8e6 + 4e6 + 2e6 + 4e6 + RESERVE
    with pytest.raises(InvalidInput) as err:
        training_memory(parameter_bytes=2, activation_bytes=ACT, low_precision_weights=True)
    assert err.value.field == "parameter_elements"


def test_one_cpu_rank_has_no_reserve_no_buckets_and_a_per_parameter_workspace() -> None:
    mem = training_memory(
        parameter_bytes=P,
        activation_bytes=ACT,
        optimizer=Optimizer.ADAM,
        cuda=False,
        distributed=False,
        largest_parameter_bytes=3_000_000,
    )
    assert (mem.reserve_bytes, mem.bucket_bytes, mem.update_workspace_bytes) == (0, 0, 6_000_000)
    assert mem.peak_bytes(10) == 4e6 + 4e6 + 8e6 + 6e6
    sgd = training_memory(parameter_bytes=P, activation_bytes=ACT, optimizer=Optimizer.SGD, cuda=False)
    assert sgd.update_workspace_bytes == 0 and sgd.bucket_bytes == P


def test_the_largest_batch_fits_the_memory_less_the_margin_by_hand() -> None:
    """SGD, one CUDA rank, 1 GiB: usable 0.9 GiB = 966,367,641.6 bytes; persistent 8 MB + 426 MiB; spare
    after the fixed 1 MB of activations 510,674,265.6 bytes, / 50 kB = 10,213 samples."""
    mem = training_memory(parameter_bytes=P, activation_bytes=ACT, optimizer=Optimizer.SGD, distributed=False)
    assert MARGIN_FRACTION == 0.1
    assert mem.largest_batch(2**30) == 10_213
    assert mem.peak_bytes(10_213) <= 0.9 * 2**30 < mem.peak_bytes(10_214)
    assert mem.largest_batch(400 * MIB) == 0
    flat = dataclasses.replace(mem, activation_bytes=Affine(1e6, 0.0))
    assert flat.largest_batch(2**30, cap=512) == 512


def _profile(**extra: Any) -> ModelProfile:
    return ModelProfile(
        model="toy",
        accelerator="T4",
        max_batch=4096,
        forward=ComputeCurve((1, 8), (0.01, 0.05)),
        backward=ComputeCurve((1, 8), (0.02, 0.1)),
        layers=(LayerGrad("l0", P, 1.0),),
        straggler_cv=0.0,
        device="cuda:0",
        extra=extra,
    )


MEASURED = {
    "parameter_bytes": P,
    "largest_parameter_bytes": 2_000_000,
    "activation_bytes": [1_000_000, 50_000],
    "optimizer": "momentum",
    "method": "cuda-allocator-peak",
    "points": [{"batch": 8}, {"batch": 16}],
}


def test_a_profiles_measured_memory_is_its_model() -> None:
    mem = profile_memory(_profile(training_memory=MEASURED))
    assert mem is not None
    assert mem.optimizer is Optimizer.MOMENTUM and mem.optimizer_state_bytes == P
    assert mem.activation_bytes == ACT
    assert "cuda-allocator-peak at batches [8, 16]" in mem.activation_source
    assert profile_memory(_profile()) is None
    adam = profile_memory(_profile(training_memory=MEASURED), optimizer=Optimizer.ADAM)
    assert adam is not None and adam.optimizer_state_bytes == 2 * P


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"activation_bytes": [1.0]}, "extra.training_memory.activation_bytes"),
        ({"activation_bytes": [1, -3]}, "extra.training_memory.activation_bytes"),
        ({"parameter_bytes": -4}, "extra.training_memory.parameter_bytes"),
        ({"optimizer": "lion"}, "extra.training_memory.optimizer"),
    ],
)
def test_a_malformed_measurement_names_its_field(change: dict[str, Any], where: str) -> None:
    with pytest.raises(InvalidInput) as err:
        profile_memory(_profile(training_memory={**MEASURED, **change}))
    assert err.value.field == where


def test_a_batch_limit_says_what_capped_it() -> None:
    """Adam, DDP: persistent 20 MB + 1,114 MiB. On 16 GiB the model allows (0.9 × 16 GiB − 20e6 −
    1,168,113,664 − 1e6) / 50 kB = 285,455 samples, above the profile's 4096, which caps it; on 1.3 GiB,
    (1,256,277,934.08 − 20e6 − 1,168,113,664 − 1e6) / 50 kB = 1,343: memory caps it."""
    prof = _profile(training_memory={**MEASURED, "optimizer": "adam"})
    limit = gpu_batch_limit(prof, instance_type="g4dn.xlarge", gpu_memory_gib=16)
    assert limit is not None
    assert (limit.memory_batch, limit.batch, limit.by_memory) == (285_455, 4096, False)
    assert "the profile's largest" in limit.reason()
    small = gpu_batch_limit(prof, instance_type="tiny.gpu", gpu_memory_gib=1.3)
    assert small is not None
    assert (small.memory_batch, small.batch, small.by_memory) == (1_343, 1_343, True)
    assert "capped by memory" in small.reason() and "adam, DDP, 10% margin" in small.reason()
    assert gpu_batch_limit(prof, instance_type="cpu", gpu_memory_gib=0) is None


def test_optimizer_names_parse_with_a_hint() -> None:
    assert parse_optimizer(" AdamW ") is Optimizer.ADAMW
    with pytest.raises(InvalidInput) as err:
        parse_optimizer("lion")
    assert err.value.field == "optimizer" and "unknown optimizer 'lion'" in err.value.detail
    assert "sgd, momentum, adam or adamw" in err.value.hint
