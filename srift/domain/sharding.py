"""Sharded data parallelism: the strategies a plan may use, their FSDP units, and memory per GPU for each.

Strategies (what PyTorch runs for each is `Setup.how`):

- `ddp`: DistributedDataParallel; every GPU holds everything (the training memory model as it is,
  `srift.domain.memory.training_memory`).
- `zero1`: DDP with `torch.distributed.optim.ZeroRedundancyOptimizer`; the optimizer state (and the update's
  temporaries) sharded over the n ranks (ZeRO stage 1, Rajbhandari et al. 2020, §5.1: P_os).
- `zero2`: FSDP2 `fully_shard(..., reshard_after_forward=False)`, FSDP1's `SHARD_GRAD_OP`: parameters,
  gradients and optimizer state sharded at rest, but every unit's parameters stay gathered from its
  forward to its backward (ZeRO stage 2 keeps the parameters whole; FSDP's SHARD_GRAD_OP frees them only
  after backward: PyTorch FSDP docs, ShardingStrategy).
- `full_shard`: FSDP2 `fully_shard` (FSDP1's `FULL_SHARD`, ZeRO stage 3): units are gathered before forward,
  freed after it, gathered again before backward.
- `hybrid`: full sharding inside each node, replicas across nodes (FSDP2 `fully_shard` on a 2-D device
  mesh, FSDP1's `HYBRID_SHARD`): all-gathers and reduce-scatters over the node's GPUs, then an allreduce
  of each shard across nodes.

Memory per GPU, in bytes, for Ψ parameters held in fp32 (4Ψ bytes, as under torch.autocast or FSDP2's
`MixedPrecisionPolicy`, whose sharded parameters stay fp32), n ranks sharing a shard, optimizer state of
k·4Ψ bytes (Adam: k = 2), w bytes per element of the gathered (working) parameters and of their unsharded
gradients (4 in fp32, 2 in mixed precision: `param_dtype=torch.bfloat16`), r = 4 bytes per element of the
reduce-scatter input (`reduce_dtype=torch.float32`), U the largest block unit and R the root unit, in
elements, A(b) the activation line at per-GPU batch b. A step peaks at one of a few moments; the peak is
what every moment holds plus the largest moment (`StrategyMemory.moments`):

    ddp         4Ψ + 4Ψ + 4kΨ + 4Ψ (buckets)   + max(A(b), update temporaries)
    zero1       4Ψ + 4Ψ + 4kΨ/n + 4Ψ (buckets) + max(A(b), update temporaries / n)
    zero2,      (4Ψ + 4kΨ)/n + the largest of
    full_shard    start of backward      gathered + wR + A(b)
                  a block's backward end the block gathered too, its gradient wU, the previous block's
                                         reduce-scatter input rU, the gradient shards made so far
                  its reduce-scatter     the block resharded, wR + (w + r)U, then wR + rU + its shard 4U/n
                  (for the first block: A(b) less its saved tensors, no shard; the next-to-last: A(0)
                  and one block's saved tensors, every shard but two blocks' and the root's; the last:
                  A(0), every shard but its own and the root's)
                  root's reduce          (w + r)R + 4(Ψ − R)/n + A(0)
                  update                 4Ψ/n + update temporaries / n

FSDP2 as it runs (torch 2.13, `torch/distributed/fsdp/_fully_shard`), which the moments follow:
- Gradient shards exist only from a unit's reduce-scatter on (`zero_grad(set_to_none=True)`, PyTorch's
  default, leaves none from the last step), so the activations' peak at the start of backward meets no
  gradient shard; they all exist at the update, with no activations, gathered parameters or reduce-scatter
  buffers (these are released when backward ends). Counting every gradient beside the activations and the
  gathered units beside the update, as this model did before, over-predicted FSDP2 by 18–26 % on an H200
  (docs/BENCHMARKS.md, "GPU check (sharded setups)").
- Gathered: the root is never resharded after forward (`_fsdp_state._lazy_init`); under full sharding a
  block is resharded after its forward and gathered again in backward with the next one prefetched (w(R +
  U) at the start, `gathered'` the same); under zero2 (`reshard_after_forward=False`) every unit stays
  gathered from forward (wΨ) until its own post-backward reshards it (`gathered'` = w(Ψ − U)).
- A unit's post-backward (`_fsdp_param_group.post_backward`, `_fsdp_collectives.foreach_reduce`) reshards
  it, copies its unsharded gradient (w per element, the parameter dtype) into a reduce-scatter input in the
  reduce dtype (r), frees the gradient, then allocates the output, the unit's fp32 gradient shard (4/n);
  one input is kept until the next unit's reduce (`reduce_scatter_max_input_buffers` = 1). The root's
  unsharded gradient (wR) exists from the head's backward until the root's reduce at the very end.
- Under mixed precision FSDP2 all-gathers bf16 parameters, so autocast's cached bf16 casts of the weights
  (2 bytes per parameter, alive from forward to each layer's backward and counted in the autocast line's
  fixed part) are not made (`sharded_activations`). The activation line itself is still counted under
  autocast, whose fp32 operators (softmax, norms, the loss) keep wider activations than the bf16 model
  FSDP2 runs: on the H200 this leaves ZeRO-2 and full sharding without checkpointing 6–7 % high.

With mixed-precision Adam (w = 2, k = 2) and Ψ/n → 0 the update holds the ZeRO paper's 2Ψ + 2Ψ + KΨ
with K = 12 bytes per parameter, sharded (§3.1: fp16 parameters and gradients, fp32 copies of parameters,
momentum and variance: here fp32 parameters and gradients, 4 + 4, and the two moments, 8).
`hybrid` is `full_shard` with n the GPUs of one node, plus NCCL's buffers for the second process group.

Activation checkpointing of every block keeps only each block's input and recomputes its activations in
backward: the activations per sample lose every block's saved tensors but one's, and gain each block's
input (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost"; Korthikanti et al. 2022, §4:
full recomputation stores 2sbh bytes per transformer layer). The block facts come from counting the model
(`BlockFacts`, `srift.refmodels.blocks`); a profile without them cannot be planned with checkpointing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from srift.domain.memory import (
    CUDA_CONTEXT_BYTES,
    DEFAULT_OPTIMIZER,
    MARGIN_FRACTION,
    NCCL_BUFFER_BYTES,
    Optimizer,
    Part,
    TrainingMemory,
    largest_fitting_batch,
    profile_memory,
    training_memory,
)
from srift.domain.profile import LayerGrad, ModelProfile
from srift.domain.structure import Affine
from srift.errors import InvalidInput

GIB = 2**30

WORKING_BYTES_FP32 = 4
WORKING_BYTES_MIXED = 2
"""Bytes per element of gathered parameters: fp32, or bf16 under `MixedPrecisionPolicy(param_dtype=
torch.bfloat16)` (FSDP2 all-gathers in the parameter dtype: PyTorch `fully_shard` docs, mp_policy)."""

REDUCE_BYTES = 4
"""Bytes per element of a reduce-scatter: `reduce_dtype=torch.float32`, the policy Srift's plans name
(PyTorch's FSDP2 tutorial recommends fp32 reduction with bf16 parameters for numerical stability)."""

GLOO_STAGING_TENSORS = 1.0
"""Whole tensors of temporary memory a CPU rank's gloo all-gather and reduce-scatter hold while they run
(NCCL writes in place: 0 there). Measured by `python -m benchmarks.gloo_staging` (docs/BENCHMARKS.md "gloo
staging buffer"; registry set `gloo-staging-buffer`): 1.00 times the whole tensor for both collectives at 1
and 2 ranks, so one whole buffer."""

GLOO_LATE_RELEASED_REDUCES = 1.0
"""Finished reduce-scatters whose staging copy a CPU rank may still hold while training goes on. Gloo's
`reduce_scatter_tensor` (torch 2.13) allreduces a clone of the whole input on one of the process group's
worker threads, which wakes the training thread and only then drops its reference to the work, freeing the
clone when it next runs (ProcessGroupGloo::runLoop); on a busy CPU that is late, and the next unit's
all-gather runs beside the clone. Measured by `python -m benchmarks.gloo_staging` (docs/BENCHMARKS.md "gloo
staging buffer"; registry set `gloo-staging-buffer`): right after back-to-back reduce-scatters return, at
most one whole clone is still in use, and none after all-gathers. NCCL makes no copy: 0 there."""

_BLOCK = re.compile(r"^(.*?\.\d+)(?:\.|$)")
"""A block is the first `name.<index>` prefix of a layer's name (an element of an nn.ModuleList or
nn.Sequential: `model.layers.3.mlp.up` belongs to `model.layers.3`)."""


class StrategyChoice(StrEnum):
    """What a plan request asks: one strategy, or `auto` (the optimizer picks per fleet, fastest that fits;
    sharded ones only for models whose memory is known)."""

    AUTO = "auto"
    DDP = "ddp"
    ZERO1 = "zero1"
    ZERO2 = "zero2"
    FULL_SHARD = "full_shard"
    HYBRID = "hybrid"


class Strategy(StrEnum):
    """How a data-parallel fleet holds the model (the module docstring says what each shards)."""

    DDP = "ddp"
    ZERO1 = "zero1"
    ZERO2 = "zero2"
    FULL_SHARD = "full_shard"
    HYBRID = "hybrid"

    @property
    def sharded(self) -> bool:
        """Whether the FSDP path (all-gather, reduce-scatter per unit) runs it."""
        return self in (Strategy.ZERO2, Strategy.FULL_SHARD, Strategy.HYBRID)

    @property
    def reshards_after_forward(self) -> bool:
        return self in (Strategy.FULL_SHARD, Strategy.HYBRID)


class WrapPolicy(StrEnum):
    """Which modules become FSDP units."""

    BLOCKS = "blocks"
    """`fully_shard` on every element of the model's repeated blocks (an nn.ModuleList or nn.Sequential of
    layers), then on the root, which keeps the rest (embeddings, final norm, head): torchtitan's Llama
    recipe and FSDP1's `transformer_auto_wrap_policy`."""


@dataclass(frozen=True, slots=True)
class Setup:
    """How a plan runs its model: strategy, activation checkpointing and wrapping (precision is the
    profile's: fp16/bf16 profiles run mixed precision, fp32/tf32 ones fp32)."""

    strategy: Strategy = Strategy.DDP
    checkpointing: bool = False
    wrap: WrapPolicy = WrapPolicy.BLOCKS

    def label(self) -> str:
        return self.strategy.value + ("+ckpt" if self.checkpointing else "")

    def how(self, *, mixed: bool) -> str:
        """One line a user can follow in PyTorch (torch ≥ 2.4's FSDP2 names)."""
        mp = (
            "mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)"
            if mixed
            else "fp32 parameters"
        )
        ckpt = "; checkpoint_wrapper / torch.utils.checkpoint on every block" if self.checkpointing else ""
        units = "fully_shard(block{}) for each repeated block, then fully_shard(model{})"
        if self.strategy is Strategy.DDP:
            base = "DistributedDataParallel(model)" + ("; torch.autocast(bfloat16)" if mixed else "")
        elif self.strategy is Strategy.ZERO1:
            base = "DistributedDataParallel(model) with ZeroRedundancyOptimizer(params, optimizer_class=...)"
            base += "; torch.autocast(bfloat16)" if mixed else ""
        elif self.strategy is Strategy.ZERO2:
            opts = ", reshard_after_forward=False, " + mp
            base = units.format(opts, opts) + " (FSDP1: ShardingStrategy.SHARD_GRAD_OP)"
        elif self.strategy is Strategy.FULL_SHARD:
            base = units.format(", " + mp, ", " + mp) + " (FSDP1: ShardingStrategy.FULL_SHARD)"
        else:
            opts = ", mesh=init_device_mesh('cuda', (nodes, gpus_per_node)), " + mp
            base = units.format(opts, opts) + " (FSDP1: ShardingStrategy.HYBRID_SHARD)"
        return base + ckpt


def is_mixed(profile: ModelProfile) -> bool:
    """Whether the profile's arithmetic is mixed precision (torch.autocast fp16/bf16)."""
    return profile.precision.autocast


# -- units -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of the backward pass (and, mirrored, of the forward pass) spent in one unit: `share` of
    the pass's compute time."""

    unit: int
    share: float


@dataclass(frozen=True, slots=True)
class Units:
    """A model's FSDP units under the blocks policy: `names[0]` is the root; `parameter_bytes` each unit's
    fp32 parameters; `segments` the backward pass in order (the forward pass runs them reversed)."""

    names: tuple[str, ...]
    parameter_bytes: tuple[int, ...]
    segments: tuple[Segment, ...]

    @property
    def root_bytes(self) -> int:
        return self.parameter_bytes[0]

    @property
    def largest_block_bytes(self) -> int:
        return max(self.parameter_bytes[1:], default=0)

    @property
    def blocks(self) -> int:
        return len(self.names) - 1

    @property
    def total_bytes(self) -> int:
        return sum(self.parameter_bytes)


def block_of(name: str) -> str | None:
    """The block a layer belongs to (see `_BLOCK`), or None for the root's layers."""
    found = _BLOCK.match(name)
    return found.group(1) if found else None


_UNITS: dict[int, tuple[tuple[LayerGrad, ...], Units]] = {}
"""`fsdp_units` answers per layers tuple (by identity, kept alive beside its answer): the optimizer asks
about the same profiles for every fleet."""


def fsdp_units(profile: ModelProfile) -> Units:
    """The profile's layers grouped into units (blocks by name, the rest in the root), with each layer's
    stretch of the backward pass, from the previous layer's readiness to its own, given to its unit."""
    found = _UNITS.get(id(profile.layers))
    if found is not None and found[0] is profile.layers:
        return found[1]
    units = _fsdp_units(profile.layers)
    if len(_UNITS) >= 256:
        _UNITS.clear()
    _UNITS[id(profile.layers)] = (profile.layers, units)
    return units


def _fsdp_units(layers: tuple[LayerGrad, ...]) -> Units:
    names = ["(root)"]
    sizes = [0]
    index: dict[str, int] = {}
    segments: list[Segment] = []
    done = 0.0
    for layer in sorted(layers, key=lambda x: x.ready_frac):
        block = block_of(layer.name)
        unit = 0
        if block is not None:
            if block not in index:
                index[block] = len(names)
                names.append(block)
                sizes.append(0)
            unit = index[block]
        sizes[unit] += layer.grad_bytes
        share = max(0.0, min(1.0, layer.ready_frac) - done)
        done = max(done, min(1.0, layer.ready_frac))
        if segments and segments[-1].unit == unit:
            segments[-1] = Segment(unit, segments[-1].share + share)
        else:
            segments.append(Segment(unit, share))
    if done < 1.0:
        segments.append(Segment(segments[-1].unit if segments else 0, 1.0 - done))
    return Units(tuple(names), tuple(sizes), tuple(s for s in segments if s.share > 0))


# -- what memory rests on ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BlockFacts:
    """Per sample, what one repeated block saves for backward and what it takes as input (counted on the
    model, `srift.refmodels.blocks`): what activation checkpointing trades."""

    count: int
    input_bytes_per_sample: float
    saved_bytes_per_sample: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class MemoryBasis:
    """A model's fp32 parameter bytes, activation line (bytes at per-GPU batch b, no checkpointing), the
    largest parameter, optional block facts, and where they come from."""

    parameter_bytes: int
    activation_bytes: Affine
    source: str
    blocks: BlockFacts | None = None
    largest_parameter_bytes: int = 0
    optimizer: Optimizer | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "parameter_bytes": self.parameter_bytes,
            "activation_bytes": self.activation_bytes.to_list(),
            "source": self.source,
            "blocks": self.blocks.to_dict() if self.blocks else None,
            "largest_parameter_bytes": self.largest_parameter_bytes,
        }


SHARDING_KEY = "sharding"
"""`extra["sharding"]` of a profile: a `MemoryBasis` document (the reference models carry one)."""


def memory_basis(profile: ModelProfile) -> MemoryBasis | None:
    """What the profile's memory rests on: its `extra["sharding"]` document, else the training memory
    `srift profile` measured or its structure counted (`srift.domain.memory.profile_memory`); None when it
    has none of these."""
    doc = (profile.extra or {}).get(SHARDING_KEY)
    if doc is not None:
        return parse_basis(doc)
    base = profile_memory(profile, cuda=True, distributed=False)
    if base is None:
        return None
    measured = (profile.extra or {}).get("training_memory")
    largest = measured.get("largest_parameter_bytes", 0) if isinstance(measured, Mapping) else 0
    return MemoryBasis(
        parameter_bytes=base.parameter_bytes,
        activation_bytes=base.activation_bytes,
        source=base.activation_source,
        largest_parameter_bytes=int(largest) if isinstance(largest, int) else 0,
    )


def parse_basis(doc: Any, *, field: str = f"extra.{SHARDING_KEY}") -> MemoryBasis:
    """A MemoryBasis from its document; InvalidInput naming the field at fault."""
    if not isinstance(doc, Mapping):
        raise InvalidInput("must be an object", hint="give parameter_bytes and activation_bytes", field=field)

    def number(value: Any, where: str) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise InvalidInput(f"{value!r} is not a number ≥ 0", hint="give bytes", field=f"{field}.{where}")
        return float(value)

    line = doc.get("activation_bytes")
    if not isinstance(line, list | tuple) or len(line) != 2:
        raise InvalidInput(
            f"{line!r} is not [fixed, per_sample]",
            hint="give two byte counts",
            field=f"{field}.activation_bytes",
        )
    blocks_doc = doc.get("blocks")
    blocks = None
    if blocks_doc is not None:
        if not isinstance(blocks_doc, Mapping):
            raise InvalidInput(
                "must be an object", hint="give count and bytes per sample", field=f"{field}.blocks"
            )
        count = int(number(blocks_doc.get("count"), "blocks.count"))
        if count < 1:
            raise InvalidInput("must be ≥ 1", hint="count the repeated blocks", field=f"{field}.blocks.count")
        blocks = BlockFacts(
            count=count,
            input_bytes_per_sample=number(
                blocks_doc.get("input_bytes_per_sample"), "blocks.input_bytes_per_sample"
            ),
            saved_bytes_per_sample=number(
                blocks_doc.get("saved_bytes_per_sample"), "blocks.saved_bytes_per_sample"
            ),
        )
    return MemoryBasis(
        parameter_bytes=int(number(doc.get("parameter_bytes"), "parameter_bytes")),
        activation_bytes=Affine(
            number(line[0], "activation_bytes[0]"), number(line[1], "activation_bytes[1]")
        ),
        source=str(doc.get("source", "given"))[:200],
        blocks=blocks,
        largest_parameter_bytes=int(number(doc.get("largest_parameter_bytes", 0), "largest_parameter_bytes")),
    )


def checkpointed(activations: Affine, blocks: BlockFacts) -> Affine:
    """The activation line with every block checkpointed: each block keeps its input, one block at a time
    holds its saved tensors again (while it is recomputed and differentiated)."""
    per_sample = (
        activations.per_sample
        - blocks.count * blocks.saved_bytes_per_sample
        + blocks.count * blocks.input_bytes_per_sample
        + blocks.saved_bytes_per_sample
    )
    return Affine(activations.fixed, max(per_sample, blocks.input_bytes_per_sample))


# -- memory per GPU --------------------------------------------------------------------------------------


SHARD_PARTS: tuple[Part, ...] = tuple(part for part in Part if part is not Part.MASTER_WEIGHTS)
"""The parts of a GPU's memory under a strategy (srift.domain.memory.Part), in the order plans list them:
a sharded strategy keeps its fp32 parameters as the master copy, so none is held apart."""


@dataclass(frozen=True, slots=True)
class Moment:
    """One moment of a training step at which a rank's memory may peak: the parts alive then on top of those
    held all step (`StrategyMemory.fixed`), and the transient line in the per-GPU batch (the activations
    alive then; at the update, the optimizer's temporaries, which do not grow with the batch)."""

    name: str
    parts: Mapping[Part, int]
    activation_bytes: Affine

    def bytes_at(self, batch: float) -> float:
        """This moment's bytes beyond the held parts at `batch` (a line below 0 counts as 0)."""
        return sum(self.parts.values()) + max(0.0, self.activation_bytes.at(batch))


@dataclass(frozen=True, slots=True)
class StrategyMemory:
    """One GPU's memory under a setup: the parts held for the whole step (`fixed`), the moments at which the
    step may peak (each with what is alive then: the start of backward, a unit's reduce-scatter, the
    update), the activation line and the update's temporaries they rest on, and the sources. The peak is
    the held parts plus the largest moment."""

    setup: Setup
    shard_ranks: int
    fixed: Mapping[Part, int]
    moments: tuple[Moment, ...]
    activation_bytes: Affine
    update_workspace_bytes: int
    optimizer: Optimizer
    source: str

    @property
    def persistent_bytes(self) -> int:
        """What every moment of the step holds (parameters and optimizer state, their shards, the reserve;
        under DDP and ZeRO-1 the gradients and buckets too)."""
        return sum(self.fixed.values())

    def peak_moment(self, batch: float) -> Moment:
        """The moment at which the step peaks at `batch` (the first of equals)."""
        return max(self.moments, key=lambda m: m.bytes_at(batch))

    def transient_bytes(self, batch: float) -> float:
        return self.peak_moment(batch).bytes_at(batch)

    def peak_bytes(self, batch: float) -> float:
        return self.persistent_bytes + self.transient_bytes(batch)

    def parts(self, batch: float) -> dict[Part, float]:
        """Each part's bytes at the peak moment; `activations` is that moment's transient line (the
        activations, or at the update the optimizer's temporaries)."""
        moment = self.peak_moment(batch)
        out: dict[Part, float] = {part: float(self.fixed.get(part, 0)) for part in SHARD_PARTS}
        for part, value in moment.parts.items():
            out[part] = out.get(part, 0.0) + float(value)
        out[Part.ACTIVATIONS] = max(0.0, moment.activation_bytes.at(batch))
        return out

    def largest_batch(
        self, capacity_bytes: float, *, margin_fraction: float = MARGIN_FRACTION, cap: int = 1 << 20
    ) -> int:
        """The largest per-GPU batch whose peak fits `capacity_bytes` less the margin (0: not even 1): every
        moment must fit, each along its own line."""
        usable = capacity_bytes * (1.0 - margin_fraction)
        return min(largest_fitting_batch(AtMoment(self, m), usable, cap=cap) for m in self.moments)

    def to_dict(self, batch: float) -> dict[str, Any]:
        parts = self.parts(batch)
        return {
            "strategy": self.setup.strategy.value,
            "checkpointing": self.setup.checkpointing,
            "shard_ranks": self.shard_ranks,
            "batch": batch,
            "peak_bytes": int(self.peak_bytes(batch)),
            "peak_moment": self.peak_moment(batch).name,
            "parts": {part.value: int(value) for part, value in parts.items()},
            "optimizer": self.optimizer.value,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class AtMoment:
    """A strategy's memory as if its step peaked at `moment` (a `srift.domain.memory.Fits`): the held parts
    and the moment's own parts persist, the moment's line grows with the batch. The step fits a batch when
    it fits at every moment, so the largest batch is the least over the moments."""

    memory: StrategyMemory
    moment: Moment

    @property
    def persistent_bytes(self) -> int:
        return self.memory.persistent_bytes + sum(self.moment.parts.values())

    @property
    def activation_bytes(self) -> Affine:
        return self.moment.activation_bytes

    def peak_bytes(self, batch: float) -> float:
        return self.memory.persistent_bytes + self.moment.bytes_at(batch)


class MemoryUnknown(InvalidInput):
    """The profile says too little to place a strategy's memory (no memory basis, or no block facts for
    checkpointing)."""


def strategy_memory(
    basis: MemoryBasis,
    units: Units,
    setup: Setup,
    *,
    world_size: int,
    gpus_per_node: int,
    mixed: bool,
    optimizer: Optimizer | None = None,
    cuda: bool = True,
) -> StrategyMemory:
    """One GPU's memory training under `setup` with `world_size` ranks on nodes of `gpus_per_node` GPUs
    (see the module docstring for each strategy's parts); `cuda` False for a CPU rank (no device context,
    no NCCL buffers, the single-tensor update's temporaries: `srift.domain.memory`). MemoryUnknown when
    checkpointing is asked of a model without block facts."""
    opt = optimizer or basis.optimizer or DEFAULT_OPTIMIZER
    activations = basis.activation_bytes
    if setup.strategy.sharded:
        activations = sharded_activations(activations, parameter_bytes=basis.parameter_bytes, mixed=mixed)
    if setup.checkpointing:
        if basis.blocks is None:
            raise MemoryUnknown(
                "activation checkpointing needs the model's block facts (input and saved bytes per block)",
                hint="plan without checkpointing, or use a model whose profile carries extra.sharding.blocks",
                field="checkpointing",
            )
        activations = checkpointed(activations, basis.blocks)
    distributed = world_size > 1
    base: TrainingMemory = training_memory(
        parameter_bytes=basis.parameter_bytes,
        activation_bytes=activations,
        optimizer=opt,
        cuda=cuda,
        distributed=distributed,
        largest_parameter_bytes=basis.largest_parameter_bytes,
        activation_source=basis.source,
    )
    strategy = setup.strategy
    n = max(1, gpus_per_node if strategy is Strategy.HYBRID else world_size)
    fixed: dict[Part, int] = {part: 0 for part in SHARD_PARTS if part is not Part.ACTIVATIONS}
    fixed[Part.RESERVE] = base.reserve_bytes
    if strategy in (Strategy.DDP, Strategy.ZERO1):
        fixed[Part.PARAMETERS] = base.parameter_bytes
        fixed[Part.GRADIENTS] = base.gradient_bytes
        fixed[Part.DDP_BUCKETS] = base.bucket_bytes
        shard = n if strategy is Strategy.ZERO1 else 1
        fixed[Part.OPTIMIZER_STATE] = math.ceil(base.optimizer_state_bytes / shard)
        workspace = math.ceil(base.update_workspace_bytes / shard)
        moments: tuple[Moment, ...] = (
            Moment("forward and backward", {}, activations),
            Moment("update", {}, Affine(float(workspace), 0.0)),
        )
    else:
        fixed[Part.PARAMETERS] = math.ceil(base.parameter_bytes / n)
        fixed[Part.OPTIMIZER_STATE] = math.ceil(base.optimizer_state_bytes / n)
        workspace = math.ceil(base.update_workspace_bytes / n)
        w = WORKING_BYTES_MIXED if mixed else WORKING_BYTES_FP32
        # Units' fp32 bytes follow the profile's layers; scale them to the basis's parameters.
        scale = base.parameter_bytes / units.total_bytes if units.total_bytes > 0 else 1.0
        saved = basis.blocks.saved_bytes_per_sample if basis.blocks is not None else 0.0
        moments = fsdp_moments(
            parameter_bytes=base.parameter_bytes,
            gradient_bytes=base.gradient_bytes,
            root_bytes=units.root_bytes * scale,
            block_bytes=units.largest_block_bytes * scale,
            ranks=n,
            working_bytes=w,
            reshard_after_forward=strategy.reshards_after_forward,
            activations=activations,
            block_saved_bytes_per_sample=saved,
            update_workspace_bytes=workspace,
            staged_collectives=not cuda,
        )
        if cuda and strategy is Strategy.HYBRID and world_size > gpus_per_node and gpus_per_node > 1:
            fixed[Part.RESERVE] += NCCL_BUFFER_BYTES
    return StrategyMemory(
        setup=setup,
        shard_ranks=n if strategy is not Strategy.DDP else 1,
        fixed=fixed,
        moments=moments,
        activation_bytes=activations,
        update_workspace_bytes=workspace,
        optimizer=opt,
        source=f"{basis.source}; {base.reserve_source}",
    )


def fsdp_moments(
    *,
    parameter_bytes: int,
    gradient_bytes: int,
    root_bytes: float,
    block_bytes: float,
    ranks: int,
    working_bytes: int,
    reshard_after_forward: bool,
    activations: Affine,
    block_saved_bytes_per_sample: float,
    update_workspace_bytes: int,
    staged_collectives: bool = False,
) -> tuple[Moment, ...]:
    """The moments at which an FSDP2 rank may peak, beside its parameter and optimizer-state shards, each as
    torch 2.13's `torch/distributed/fsdp/_fully_shard` runs it (module docstring: "FSDP2 as it runs").

    Byte counts are fp32 bytes (`root_bytes`, `block_bytes` the root unit and the largest block); `ranks`
    share a shard; `working_bytes` per element of the gathered parameters and of their unsharded gradients
    (the parameter dtype); the reduce-scatter's input is in `REDUCE_BYTES` per element, its output is the
    gradient shard, in the parameters' own fp32. `staged_collectives` (a CPU rank: gloo) adds gloo's
    staging buffer, GLOO_STAGING_TENSORS whole tensors in each all-gather and reduce-scatter (NCCL writes in
    place), where one is in flight: the all-gather of the block prefetched as backward starts (full
    sharding, any n) and a block's reduce-scatter (n > 1; FSDP2 copies instead at n = 1); and, from the first
    block's reduce-scatter on, GLOO_LATE_RELEASED_REDUCES finished reduce-scatters' copies that gloo's worker
    thread has not freed yet (the previous unit's: a block's, at the update the root's). That is the worst
    case a busy CPU reaches (the copy is usually freed within the call), so a CPU rank's prediction is a
    bound its in-step runs read a few per cent under."""
    n = max(1, ranks)
    per = working_bytes / 4  # gathered or unsharded-gradient bytes per fp32 byte
    red = REDUCE_BYTES / 4
    grad = gradient_bytes / parameter_bytes if parameter_bytes else 1.0
    root, block = root_bytes, block_bytes
    every_shard = gradient_bytes / n
    # Start of backward, where the activations peak: no gradient shard yet (zero_grad(set_to_none=True));
    # the root stays gathered after forward (FSDP2 never reshards the root after forward) and its unsharded
    # gradient exists from the head's backward until the root's reduce-scatter at the end; full sharding
    # has the last block gathered again (prefetched), zero2 still holds every unit from forward.
    gathered_start = per * parameter_bytes if not reshard_after_forward else per * (root + block)
    staging = GLOO_STAGING_TENSORS if staged_collectives else 0.0
    staged_gather = staging * per * block if reshard_after_forward else 0.0
    staged_reduce = staging * red * grad * block if n > 1 else 0.0
    # A finished reduce-scatter's copy that gloo frees late: the previous unit's (a block's; the root's at
    # the update), from the first block's reduce-scatter on.
    late = GLOO_LATE_RELEASED_REDUCES if staged_collectives else 0.0
    late_block = late * staged_reduce
    late_root = late * (staging * red * grad * root if n > 1 else 0.0)
    start = Moment(
        "start of backward",
        {
            Part.GATHERED_PARAMETERS: math.ceil(gathered_start),
            Part.COMM_BUFFERS: math.ceil(per * grad * root + staged_gather),
        },
        activations,
    )
    # A block's backward and post-backward. At the end of its backward the block is still gathered (with,
    # under full sharding, the next one prefetched), its unsharded gradient is complete, and the previous
    # block's reduce-scatter input is still held (reduce_scatter_max_input_buffers = 1 releases it only at
    # this block's reduce). Then the block is resharded, the previous input released, its gradient copied
    # into a new reduce-scatter input (both alive), freed, and the output, the block's gradient shard,
    # allocated beside the input. Three blocks bound the others: the first, with every activation but
    # that block's saved tensors still alive and no gradient shard yet; the next-to-last, with one block's
    # saved tensors left and every shard but the root's and two blocks'; the last, with every shard but the
    # root's and its own. The head's activations went first in backward and the blocks' are released as
    # they go: the line's fixed part remains.
    first = Affine(activations.fixed, max(0.0, activations.per_sample - block_saved_bytes_per_sample))
    last = Affine(activations.fixed, 0.0)
    if reshard_after_forward:
        before = (per * (root + 2 * block), per * (root + 2 * block), per * (root + block))
        after = (per * (root + block), per * (root + block), per * root)
    else:
        before = (per * parameter_bytes, per * (root + 2 * block), per * (root + block))
        after = (per * (parameter_bytes - block), per * (root + block), per * root)
    moments = [start]
    for (name, shards, line, previous, freed_late), gathered_before, gathered_after in zip(
        (
            ("the first block's", 0.0, first, 0.0, 0.0),
            (
                "the next-to-last block's",
                max(0.0, every_shard - grad * (2 * block + root) / n),
                Affine(activations.fixed, min(block_saved_bytes_per_sample, activations.per_sample)),
                red * grad * block,
                late_block,
            ),
            (
                "the last block's",
                max(0.0, every_shard - grad * (block + root) / n),
                last,
                red * grad * block,
                late_block,
            ),
        ),
        before,
        after,
        strict=True,
    ):
        moments += _block_moments(
            name,
            gathered=(gathered_before, gathered_after),
            shards=shards,
            line=line,
            held=per * grad * root + freed_late,
            unsharded=per * grad * block,
            reduce_in=red * grad * block,
            previous=previous,
            staged_reduce=staged_reduce,
            shard=grad * block / n,
        )
    # End of backward, the root's reduce-scatter: every unit resharded, every other gradient shard made.
    moments += [
        Moment(
            "the root's reduce-scatter copy-in",
            {
                Part.COMM_BUFFERS: math.ceil((per + red) * grad * root + late_block),
                Part.GRADIENTS: math.ceil(max(0.0, every_shard - grad * root / n)),
            },
            last,
        ),
        Moment(
            "the root's reduce-scatter output",
            {
                Part.COMM_BUFFERS: math.ceil(red * grad * root + late_block),
                Part.GRADIENTS: math.ceil(every_shard),
            },
            last,
        ),
    ]
    # The optimizer step: every gradient shard and the update's temporaries (the reduce-scatter buffers are
    # released when backward ends).
    update_parts = {Part.GRADIENTS: math.ceil(every_shard)}
    if late_root > 0:
        update_parts[Part.COMM_BUFFERS] = math.ceil(late_root)
    update = Moment("update", update_parts, Affine(float(update_workspace_bytes), 0.0))
    return (*moments, update)


def _block_moments(
    name: str,
    *,
    gathered: tuple[float, float],
    shards: float,
    line: Affine,
    held: float,
    unsharded: float,
    reduce_in: float,
    previous: float,
    staged_reduce: float,
    shard: float,
) -> list[Moment]:
    """One block's three moments in `fsdp_moments` (bytes): its backward end (gathered `gathered[0]`, its
    unsharded gradient and the previous block's reduce-scatter input `previous` alive), its reduce-scatter
    copy-in (gathered `gathered[1]`, the gradient and its reduce-scatter input both alive) and output (the
    input, gloo's staging copy and the block's new gradient shard `shard`). `held` is what stays in the
    communication buffers throughout: the root's unsharded gradient and gloo's late-freed copy."""
    steps = (
        ("backward end", gathered[0], held + unsharded + previous, shards),
        ("reduce-scatter copy-in", gathered[1], held + unsharded + reduce_in, shards),
        ("reduce-scatter output", gathered[1], held + reduce_in + staged_reduce, shards + shard),
    )
    return [
        Moment(
            f"{name} {step}",
            {
                Part.GATHERED_PARAMETERS: math.ceil(gathered_bytes),
                Part.COMM_BUFFERS: math.ceil(comm_bytes),
                Part.GRADIENTS: math.ceil(gradient_bytes),
            },
            line,
        )
        for step, gathered_bytes, comm_bytes, gradient_bytes in steps
    ]


def activation_batch_limit(
    basis: MemoryBasis, *, capacity_bytes: float, mixed: bool, margin_fraction: float = MARGIN_FRACTION
) -> int:
    """The largest per-GPU batch whose activations alone (checkpointed when the block facts allow, without
    autocast's weight casts under mixed precision), the CUDA context and NCCL's buffers fit: what no
    strategy can exceed, however many ranks share the rest (0 when batch 1 does not fit)."""
    line = sharded_activations(basis.activation_bytes, parameter_bytes=basis.parameter_bytes, mixed=mixed)
    if basis.blocks is not None:
        line = checkpointed(line, basis.blocks)
    usable = capacity_bytes * (1.0 - margin_fraction) - CUDA_CONTEXT_BYTES - NCCL_BUFFER_BYTES
    if line.at(1) > usable:
        return 0
    if line.per_sample <= 0:
        return 1 << 20
    return int(max(1, math.floor((usable - line.fixed) / line.per_sample)))


def sharded_activations(activations: Affine, *, parameter_bytes: int, mixed: bool) -> Affine:
    """The activation line as FSDP runs the model: under mixed precision FSDP2 gathers low-precision
    parameters (counted as gathered parameters), so autocast's cached casts of the weights (2 bytes per
    parameter, in the line's fixed part when counted under autocast: torch/amp/autocast_mode.py keeps each
    weight's cast in the autocast cache for the forward, and the matmul saves it for backward) are left
    out."""
    if not mixed:
        return activations
    casts = WORKING_BYTES_MIXED / 4 * parameter_bytes
    return Affine(max(0.0, activations.fixed - casts), activations.per_sample)


def gpu_fit(
    memory: StrategyMemory, *, capacity_bytes: float, batch: float, margin_fraction: float = MARGIN_FRACTION
) -> str | None:
    """None when `batch` per GPU fits `capacity_bytes` less the margin; else one line saying by how much."""
    need = memory.peak_bytes(batch)
    usable = capacity_bytes * (1.0 - margin_fraction)
    if need <= usable:
        return None
    parts = memory.parts(batch)
    top = sorted(parts.items(), key=lambda kv: -kv[1])[:3]
    listed = ", ".join(f"{p.value} {v / GIB:.1f}" for p, v in top)
    return (
        f"{memory.setup.label()} needs {need / GIB:.1f} GiB per GPU at batch {batch:g} (largest parts, "
        f"GiB: {listed}), above {usable / GIB:.1f} of {capacity_bytes / GIB:.1f} GiB "
        f"({margin_fraction:.0%} margin)"
    )


__all__ = [
    "GLOO_LATE_RELEASED_REDUCES",
    "GLOO_STAGING_TENSORS",
    "REDUCE_BYTES",
    "SHARDING_KEY",
    "SHARD_PARTS",
    "BlockFacts",
    "MemoryBasis",
    "MemoryUnknown",
    "Moment",
    "Segment",
    "Setup",
    "Strategy",
    "StrategyChoice",
    "StrategyMemory",
    "Units",
    "WrapPolicy",
    "activation_batch_limit",
    "block_of",
    "checkpointed",
    "fsdp_moments",
    "fsdp_units",
    "gpu_fit",
    "is_mixed",
    "memory_basis",
    "parse_basis",
    "sharded_activations",
    "strategy_memory",
]
