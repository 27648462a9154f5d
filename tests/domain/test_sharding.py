"""Memory per GPU under each strategy, part by part, by hand; FSDP units from a profile's layers."""

from __future__ import annotations

import pytest

from srift.domain.memory import CUDA_CONTEXT_BYTES, NCCL_BUFFER_BYTES, Part
from srift.domain.profile import ComputeCurve, LayerGrad, ModelProfile
from srift.domain.sharding import (
    SHARDING_KEY,
    BlockFacts,
    MemoryBasis,
    MemoryUnknown,
    Segment,
    Setup,
    Strategy,
    Units,
    block_of,
    fsdp_units,
    gpu_fit,
    memory_basis,
    strategy_memory,
)
from srift.domain.structure import Affine
from srift.errors import InvalidInput

RESERVE = CUDA_CONTEXT_BYTES + NCCL_BUFFER_BYTES
BASIS = MemoryBasis(
    parameter_bytes=4000,
    activation_bytes=Affine(1000.0, 1000.0),
    source="hand",
    blocks=BlockFacts(count=2, input_bytes_per_sample=50.0, saved_bytes_per_sample=300.0),
)
"""1,000 fp32 parameters (4,000 bytes); activations 1,000 + 1,000·b bytes; two blocks of 300 saved bytes
per sample each, taking 50 bytes per sample."""
UNITS = Units(
    names=("(root)", "layers.0", "layers.1"),
    parameter_bytes=(800, 1600, 1600),
    segments=(Segment(0, 0.2), Segment(2, 0.4), Segment(1, 0.4)),
)


def parts(strategy: Strategy, *, mixed: bool = True, ckpt: bool = False, world: int = 4, node: int = 2):
    memory = strategy_memory(
        BASIS, UNITS, Setup(strategy, checkpointing=ckpt), world_size=world, gpus_per_node=node, mixed=mixed
    )
    return memory, {p: int(v) for p, v in memory.parts(10).items()}


def test_ddp_is_the_training_memory_model() -> None:
    # Adam: state 2 × 4,000; DDP's buckets 4,000; activations at batch 10: 11,000 (above the update's
    # temporaries, one copy of the parameters, 4,000); the CUDA context and NCCL's buffers.
    _, got = parts(Strategy.DDP)
    assert got == {
        Part.PARAMETERS: 4000,
        Part.GRADIENTS: 4000,
        Part.OPTIMIZER_STATE: 8000,
        Part.DDP_BUCKETS: 4000,
        Part.GATHERED_PARAMETERS: 0,
        Part.COMM_BUFFERS: 0,
        Part.ACTIVATIONS: 11000,
        Part.RESERVE: RESERVE,
    }


def test_zero1_shards_the_optimizer_state_only() -> None:
    memory, got = parts(Strategy.ZERO1)
    assert got[Part.OPTIMIZER_STATE] == 2000
    assert (got[Part.PARAMETERS], got[Part.GRADIENTS], got[Part.DDP_BUCKETS]) == (4000,) * 3
    assert memory.update_workspace_bytes == 1000


def test_zero2_holds_every_unit_gathered_between_forward_and_backward() -> None:
    # Sharded over 4: parameters 1,000, optimizer state 2,000. Gathered in bf16: 2 bytes × 1,000 = 2,000.
    # Gradient shards: at the first reduce-scatter one block's, 1,600 / 4 = 400 (at the end of backward
    # every shard, 1,000, with only the root gathered, 400 bytes instead of 2,000: less). A block's bf16
    # gradient (2 × 400) and its fp32 reduce-scatter input (4 × 400): 2,400.
    _, got = parts(Strategy.ZERO2)
    assert got[Part.PARAMETERS] == 1000
    assert got[Part.GRADIENTS] == 400
    assert got[Part.OPTIMIZER_STATE] == 2000
    assert got[Part.DDP_BUCKETS] == 0
    assert got[Part.GATHERED_PARAMETERS] == 2000
    assert got[Part.COMM_BUFFERS] == 2400


def test_full_shard_holds_the_root_a_unit_and_the_prefetched_next() -> None:
    # Gathered in bf16: the root (200 elements) and a block (400): 1,200 bytes, plus the prefetched block
    # (800) less the gradient shards not yet made while it is gathered, (4,000 − 1,600) / 4 = 600: 1,400.
    # Comm: a block's 2,400 (the root's phase, 6 × 200 = 1,200 with the blocks freed, is smaller).
    # Activations: autocast's weight casts (2 bytes × 1,000 parameters, in the line's fixed part) are not
    # made under FSDP's bf16 parameters: max(0, 1,000 − 2,000) + 1,000 × 10.
    memory, got = parts(Strategy.FULL_SHARD)
    assert got[Part.GATHERED_PARAMETERS] == 1400
    assert got[Part.COMM_BUFFERS] == 2400
    assert got[Part.ACTIVATIONS] == 10000
    assert memory.peak_bytes(10) == 1000 + 1000 + 2000 + 1400 + 2400 + 10000 + RESERVE
    assert memory.shard_ranks == 4


def test_full_shard_in_fp32_gathers_four_bytes_per_element() -> None:
    # 4 × (200 + 400) + max(0, 4 × 400 − 600)
    _, got = parts(Strategy.FULL_SHARD, mixed=False)
    assert got[Part.GATHERED_PARAMETERS] == 3400
    assert got[Part.COMM_BUFFERS] == (4 + 4) * 400


def test_hybrid_shards_within_a_node_and_adds_the_replicate_groups_buffers() -> None:
    memory, got = parts(Strategy.HYBRID, world=4, node=2)
    assert (got[Part.PARAMETERS], got[Part.GRADIENTS], got[Part.OPTIMIZER_STATE]) == (
        2000,
        2000,
        4000,
    )
    assert got[Part.RESERVE] == RESERVE + NCCL_BUFFER_BYTES
    assert memory.shard_ranks == 2


def test_checkpointing_keeps_block_inputs_and_one_blocks_activations() -> None:
    # Per sample: 1,000 − 2 × 300 + 2 × 50 + 300 = 800; at batch 10, in fp32 (no casts left out):
    # 1,000 + 8,000.
    memory, got = parts(Strategy.FULL_SHARD, ckpt=True, mixed=False)
    assert memory.activation_bytes == Affine(1000.0, 800.0)
    assert got[Part.ACTIVATIONS] == 9000


def test_checkpointing_without_block_facts_is_refused_with_its_field() -> None:
    bare = MemoryBasis(parameter_bytes=4000, activation_bytes=Affine(0.0, 1.0), source="hand")
    with pytest.raises(MemoryUnknown) as err:
        strategy_memory(
            bare, UNITS, Setup(Strategy.DDP, checkpointing=True), world_size=2, gpus_per_node=1, mixed=False
        )
    assert err.value.field == "checkpointing"


def test_zero_papers_sixteen_bytes_per_parameter_sharded() -> None:
    """Rajbhandari et al. 2020, §3.1: mixed-precision Adam keeps 2Ψ + 2Ψ + 12Ψ bytes; fully sharded over
    N_d ranks, (2 + 2 + K)Ψ/N_d with K = 12. Here: fp32 parameters and gradients (4 + 4) and Adam's two
    moments (8) are the same 16 bytes per parameter, over 64 ranks."""
    psi = 1_000_000_000
    basis = MemoryBasis(parameter_bytes=4 * psi, activation_bytes=Affine(0.0, 0.0), source="hand")
    units = Units(("(root)", "h.0"), (0, 4 * psi), (Segment(1, 1.0),))
    memory = strategy_memory(
        basis, units, Setup(Strategy.FULL_SHARD), world_size=64, gpus_per_node=8, mixed=True
    )
    p = memory.parts(1)
    sharded = p[Part.PARAMETERS] + p[Part.GRADIENTS] + p[Part.OPTIMIZER_STATE]
    assert sharded == pytest.approx(16 * psi / 64, abs=3)


def test_the_largest_batch_and_the_reason_when_nothing_fits() -> None:
    memory, _ = parts(Strategy.FULL_SHARD)
    fixed = memory.persistent_bytes + memory.activation_bytes.fixed
    capacity = (fixed + 1000 * 7.5) / 0.9
    assert memory.largest_batch(capacity) == 7
    assert gpu_fit(memory, capacity_bytes=capacity, batch=7) is None
    reason = gpu_fit(memory, capacity_bytes=capacity, batch=8)
    assert reason is not None and reason.startswith("full_shard needs") and "GiB per GPU at batch 8" in reason


def _profile(layers: list[tuple[str, int, float]], extra: dict | None = None) -> ModelProfile:
    return ModelProfile(
        model="toy",
        accelerator="A10G",
        max_batch=8,
        forward=ComputeCurve((1, 8), (0.1, 0.8)),
        backward=ComputeCurve((1, 8), (0.2, 1.6)),
        layers=tuple(LayerGrad(n, b, r) for n, b, r in layers),
        straggler_cv=0.0,
        extra=extra or {},
    )


def test_units_group_layers_by_block_and_give_each_its_stretch_of_backward() -> None:
    # Backward order: head (root) to 0.1, block 1 to 0.5, block 0 to 0.9, embedding (root) to 1.0.
    prof = _profile(
        [
            ("net.head", 40, 0.1),
            ("net.h.1.fc", 100, 0.3),
            ("net.h.1.attn", 60, 0.5),
            ("net.h.0.fc", 100, 0.7),
            ("net.h.0.attn", 60, 0.9),
            ("net.wte", 200, 1.0),
        ]
    )
    units = fsdp_units(prof)
    assert units.names == ("(root)", "net.h.1", "net.h.0")
    assert units.parameter_bytes == (240, 160, 160)
    assert [(s.unit, round(s.share, 9)) for s in units.segments] == [(0, 0.1), (1, 0.4), (2, 0.4), (0, 0.1)]
    assert block_of("model.layers.12.mlp.up_proj") == "model.layers.12"
    assert block_of("lm_head") is None


def test_a_profiles_sharding_document_is_read_and_checked() -> None:
    doc = {"parameter_bytes": 4000, "activation_bytes": [10, 20], "blocks": {"count": 2}}
    with pytest.raises(InvalidInput) as err:
        memory_basis(_profile([("a", 4, 1.0)], {SHARDING_KEY: doc}))
    assert err.value.field == "extra.sharding.blocks.input_bytes_per_sample"
    doc["blocks"] = {"count": 2, "input_bytes_per_sample": 5, "saved_bytes_per_sample": 7}
    basis = memory_basis(_profile([("a", 4, 1.0)], {SHARDING_KEY: doc}))
    assert basis is not None and basis.blocks == BlockFacts(2, 5.0, 7.0)
    assert memory_basis(_profile([("a", 4, 1.0)])) is None
