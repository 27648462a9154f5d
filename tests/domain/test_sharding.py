"""Memory per GPU under each strategy, part by part, by hand; FSDP units from a profile's layers."""

from __future__ import annotations

import pytest

from srift.domain.memory import CUDA_CONTEXT_BYTES, NCCL_BUFFER_BYTES, Part
from srift.domain.profile import ComputeCurve, LayerGrad, ModelProfile
from srift.domain.sharding import (
    GLOO_LATE_RELEASED_REDUCES,
    GLOO_STAGING_TENSORS,
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


def moment(memory, name: str) -> dict[Part, int]:
    """The parts a moment holds beyond the step's held parts, its transient line at batch 10 as
    `activations`."""
    found = next(m for m in memory.moments if m.name == name)
    return {**found.parts, Part.ACTIVATIONS: int(found.activation_bytes.at(10))}


START, FIRST_IN, FIRST_OUT = (
    "start of backward",
    "the first block's reduce-scatter copy-in",
    "the first block's reduce-scatter output",
)
LAST_IN, ROOT_IN, UPDATE = (
    "the last block's reduce-scatter copy-in",
    "the root's reduce-scatter copy-in",
    "update",
)


def test_zero2_holds_every_unit_gathered_from_forward_to_each_units_backward() -> None:
    # Sharded over 4: parameters 1,000, optimizer state 2,000, held all step. At the start of backward no
    # gradient shard exists (zero_grad(set_to_none=True)); every unit is gathered in bf16 (2 bytes × 1,000
    # = 2,000); the root's bf16 gradient (2 × 200) exists from the head's backward. Activations: autocast's
    # weight casts (2 bytes × 1,000 parameters, in the line's fixed part) are not made under FSDP's bf16
    # parameters: max(0, 1,000 − 2,000) + 1,000 × 10.
    memory, got = parts(Strategy.ZERO2)
    assert moment(memory, START) == {
        Part.GATHERED_PARAMETERS: 2000,
        Part.COMM_BUFFERS: 400,
        Part.ACTIVATIONS: 10000,
    }
    # The first block's reduce-scatter: that block resharded (2 × (1,000 − 400) gathered), its 300 saved
    # bytes per sample released; the root's bf16 gradient, the block's (2 × 400) and the fp32 input (4 ×
    # 400) at the copy-in; then the block's bf16 gradient freed and its fp32 shard (1,600 / 4) made.
    assert moment(memory, FIRST_IN) == {
        Part.GATHERED_PARAMETERS: 1200,
        Part.COMM_BUFFERS: 400 + 800 + 1600,
        Part.GRADIENTS: 0,
        Part.ACTIVATIONS: 7000,
    }
    assert moment(memory, FIRST_OUT)[Part.COMM_BUFFERS] == 400 + 1600
    assert moment(memory, FIRST_OUT)[Part.GRADIENTS] == 400
    # The optimizer step: every gradient shard (4,000 / 4) and the foreach update's temporary (one copy
    # of the parameters' shard).
    assert moment(memory, UPDATE) == {Part.GRADIENTS: 1000, Part.ACTIVATIONS: 1000}
    assert memory.peak_moment(10).name == START
    assert got[Part.PARAMETERS] == 1000 and got[Part.OPTIMIZER_STATE] == 2000 and got[Part.DDP_BUCKETS] == 0
    assert memory.peak_bytes(10) == 1000 + 2000 + 2000 + 400 + 10000 + RESERVE


def test_full_shard_holds_the_root_and_one_prefetched_block_at_the_start_of_backward() -> None:
    # Gathered in bf16: the root (200 elements, never resharded after forward) and the prefetched last
    # block (400): 1,200 bytes; the root's bf16 gradient 400.
    memory, got = parts(Strategy.FULL_SHARD)
    assert moment(memory, START) == {
        Part.GATHERED_PARAMETERS: 1200,
        Part.COMM_BUFFERS: 400,
        Part.ACTIVATIONS: 10000,
    }
    # The last block's reduce-scatter: only the root gathered, every gradient shard but this block's and
    # the root's, (4,000 − 1,600 − 800) / 4 = 400; the activations down to the line's fixed part.
    assert moment(memory, LAST_IN) == {
        Part.GATHERED_PARAMETERS: 400,
        Part.COMM_BUFFERS: 400 + 800 + 1600,
        Part.GRADIENTS: 400,
        Part.ACTIVATIONS: 0,
    }
    # The root's: its bf16 gradient and fp32 input (6 × 200), every other shard (1,000 − 200).
    assert moment(memory, ROOT_IN) == {Part.COMM_BUFFERS: 1200, Part.GRADIENTS: 800, Part.ACTIVATIONS: 0}
    assert got[Part.GATHERED_PARAMETERS] == 1200 and got[Part.GRADIENTS] == 0
    assert memory.peak_bytes(10) == 1000 + 2000 + 1200 + 400 + 10000 + RESERVE
    assert memory.shard_ranks == 4


def test_full_shard_in_fp32_gathers_four_bytes_per_element_and_peaks_in_the_first_blocks_backward() -> None:
    # fp32: at the end of the first block's backward the root, the block and the prefetched next are
    # gathered, 4 × (200 + 400 + 400), beside the root's gradient 800 and the block's 1,600; the
    # activations keep their fixed 1,000 (no casts to leave out) and 700 per sample. At its copy-in the
    # block is resharded (2,400) and its fp32 reduce-scatter input (1,600) joins the gradients: the same.
    memory, _ = parts(Strategy.FULL_SHARD, mixed=False)
    assert moment(memory, "the first block's backward end") == {
        Part.GATHERED_PARAMETERS: 4000,
        Part.COMM_BUFFERS: 800 + 1600,
        Part.GRADIENTS: 0,
        Part.ACTIVATIONS: 1000 + 7000,
    }
    assert moment(memory, FIRST_IN) == {
        Part.GATHERED_PARAMETERS: 2400,
        Part.COMM_BUFFERS: 800 + 3200,
        Part.GRADIENTS: 0,
        Part.ACTIVATIONS: 1000 + 7000,
    }
    assert memory.peak_moment(10).name == "the first block's backward end"
    assert memory.peak_bytes(10) == 1000 + 2000 + 4000 + 2400 + 8000 + RESERVE


def test_the_previous_blocks_reduce_scatter_input_is_held_until_the_next_blocks_reduce() -> None:
    # Next-to-last block, bf16: the root and two blocks gathered (2 × 1,000), the root's gradient (400),
    # its own bf16 gradient (800) and the last block's fp32 input still held (1,600); every shard but the
    # root's and two blocks' (1,000 − (800 + 3,200) / 4 = 0).
    memory, _ = parts(Strategy.FULL_SHARD)
    assert moment(memory, "the next-to-last block's backward end") == {
        Part.GATHERED_PARAMETERS: 2000,
        Part.COMM_BUFFERS: 400 + 800 + 1600,
        Part.GRADIENTS: 0,
        Part.ACTIVATIONS: 3000,
    }


def _cpu_and_gpu(world: int):
    """fp32 full sharding over `world` CPU ranks (gloo) and GPU ranks, one rank per node."""
    return [
        strategy_memory(
            BASIS,
            UNITS,
            Setup(Strategy.FULL_SHARD),
            world_size=world,
            gpus_per_node=1,
            mixed=False,
            cuda=cuda,
        )
        for cuda in (False, True)
    ]


def test_a_cpu_rank_may_still_hold_the_previous_reduce_scatters_gloo_copy() -> None:
    # Gloo frees a finished reduce-scatter's clone of its input (one whole block's fp32 gradient, 1,600)
    # when its worker thread next runs, which on a busy CPU is after the next unit's all-gather: every
    # moment from the first block's reduce-scatter on may hold it beside what it holds on a GPU; the update
    # may hold the root's (800). The first block's backward comes before any reduce-scatter.
    cpu, gpu = _cpu_and_gpu(2)
    late = GLOO_LATE_RELEASED_REDUCES * GLOO_STAGING_TENSORS * 1600
    assert late == 1600
    gathered = GLOO_STAGING_TENSORS * 1600  # the prefetched block's all-gather, in flight at the start
    for name, extra in [
        (START, gathered),
        ("the first block's backward end", 0),
        ("the next-to-last block's backward end", late),
        ("the last block's reduce-scatter copy-in", late),
        ("the last block's reduce-scatter output", late + GLOO_STAGING_TENSORS * 1600),
        ("the root's reduce-scatter output", late),
        ("update", GLOO_LATE_RELEASED_REDUCES * GLOO_STAGING_TENSORS * 800),
    ]:
        added = moment(cpu, name)[Part.COMM_BUFFERS] - moment(gpu, name).get(Part.COMM_BUFFERS, 0)
        assert added == extra, name
    # One rank has no reduce-scatter to free late (FSDP2 copies the gradient instead).
    one_cpu, one_gpu = _cpu_and_gpu(1)
    assert moment(one_cpu, "the next-to-last block's backward end") == moment(
        one_gpu, "the next-to-last block's backward end"
    )
    assert Part.COMM_BUFFERS not in moment(one_cpu, "update")


def test_hybrid_shards_within_a_node_and_adds_the_replicate_groups_buffers() -> None:
    memory, got = parts(Strategy.HYBRID, world=4, node=2)
    assert (got[Part.PARAMETERS], got[Part.OPTIMIZER_STATE]) == (2000, 4000)
    assert moment(memory, UPDATE)[Part.GRADIENTS] == 2000
    assert got[Part.RESERVE] == RESERVE + NCCL_BUFFER_BYTES
    assert memory.shard_ranks == 2


def test_the_update_peaks_when_the_activations_are_small() -> None:
    # One rank, bf16, checkpointed: 9 activation bytes per sample, 50 bytes of a block gathered, a block's
    # gradient and reduce-scatter input 300; the update holds every gradient (4,000) and the foreach
    # temporary (4,000) but no gathered parameters or reduce-scatter buffers, and is the peak: parameters,
    # gradients, two Adam moments and one temporary (what the H200 measured for ZeRO-2 and full sharding
    # with checkpointing).
    tiny = MemoryBasis(
        parameter_bytes=4000,
        activation_bytes=Affine(0.0, 10.0),
        source="hand",
        blocks=BlockFacts(count=2, input_bytes_per_sample=1.0, saved_bytes_per_sample=3.0),
    )
    small_units = Units(("(root)", "layers.0", "layers.1"), (0, 100, 100), (Segment(2, 0.5), Segment(1, 0.5)))
    memory = strategy_memory(
        tiny, small_units, Setup(Strategy.FULL_SHARD, checkpointing=True), world_size=1, gpus_per_node=1,
        mixed=True,
    )  # fmt: skip
    assert memory.peak_moment(1).name == UPDATE
    assert memory.peak_bytes(1) == 4000 + 4000 + 8000 + 4000 + CUDA_CONTEXT_BYTES


def test_checkpointing_keeps_block_inputs_and_one_blocks_activations() -> None:
    # Per sample: 1,000 − 2 × 300 + 2 × 50 + 300 = 800; at batch 10, in fp32 (no casts left out):
    # 1,000 + 8,000 at the start of backward, 1,000 + 5,000 at the first block's reduce-scatter.
    memory, _ = parts(Strategy.FULL_SHARD, ckpt=True, mixed=False)
    assert memory.activation_bytes == Affine(1000.0, 800.0)
    assert moment(memory, START)[Part.ACTIVATIONS] == 9000
    assert moment(memory, FIRST_IN)[Part.ACTIVATIONS] == 6000


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
    at_update = {**memory.fixed, **next(m for m in memory.moments if m.name == UPDATE).parts}
    sharded = at_update[Part.PARAMETERS] + at_update[Part.GRADIENTS] + at_update[Part.OPTIMIZER_STATE]
    assert sharded == pytest.approx(16 * psi / 64, abs=3)


def test_the_largest_batch_and_the_reason_when_nothing_fits() -> None:
    # Two lines bound the batch: the start of backward (beside the held 3,000: gathered 1,200 and the
    # root's gradient 400, then 1,000 per sample) and the first block's reduce-scatter (4,000 beside, 700
    # per sample); 9,100 bytes above the held parts allow batch 7 on each (7.5 and 7.3).
    memory, _ = parts(Strategy.FULL_SHARD)
    fixed = memory.persistent_bytes + 1200 + 400
    capacity = (fixed + 1000 * 7.5) / 0.9
    assert memory.largest_batch(capacity) == 7
    # With 8,800 above the held parts the start allows 7 (7.2) but the reduce-scatter only 6 (6.9).
    assert memory.largest_batch((memory.persistent_bytes + 8800) / 0.9) == 6
    assert gpu_fit(memory, capacity_bytes=capacity, batch=7) is None
    reason = gpu_fit(memory, capacity_bytes=capacity, batch=8)
    assert reason is not None and reason.startswith("full_shard needs") and "GiB per GPU at batch 8" in reason


def test_the_largest_batch_is_0_when_batch_1_does_not_fit_and_the_cap_when_no_line_grows() -> None:
    memory, _ = parts(Strategy.FULL_SHARD)
    assert memory.largest_batch(memory.peak_bytes(1) / 0.9 * (1 - 1e-9)) == 0
    assert memory.largest_batch(memory.peak_bytes(1) / 0.9) >= 1
    # Activations that do not grow with the batch: every moment's line is flat, so any batch fits.
    flat_basis = MemoryBasis(parameter_bytes=4000, activation_bytes=Affine(1000.0, 0.0), source="hand")
    flat = strategy_memory(
        flat_basis, UNITS, Setup(Strategy.FULL_SHARD), world_size=4, gpus_per_node=2, mixed=True
    )
    capacity = flat.peak_bytes(1) / 0.9
    assert flat.largest_batch(capacity, cap=512) == 512
    assert flat.largest_batch(capacity * (1 - 1e-9), cap=512) == 0


def test_the_largest_batch_is_the_largest_whose_peak_fits() -> None:
    # Every moment's line checked at once: the answer is the last batch whose whole-step peak fits.
    for strategy in Strategy:
        memory, _ = parts(strategy)
        for extra in range(0, 40_000, 777):
            capacity = (memory.peak_bytes(1) + extra) / 0.9
            fitting = [b for b in range(1, 200) if memory.peak_bytes(b) <= capacity * 0.9]
            assert memory.largest_batch(capacity) == max(fitting), (strategy, extra)


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
