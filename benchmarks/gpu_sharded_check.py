"""One device, every setup one rank can run: peak memory against the sharding memory model, step time.

For the next lent GPU (issue #45): the Llama 3.2 1B reference model (bf16 mixed precision, AdamW, 2,048
tokens per sample) at world size 1, under DDP, ZeRO-1 (ZeroRedundancyOptimizer), ZeRO-2 and full sharding
(FSDP2 `fully_shard` on each block and the root, `MixedPrecisionPolicy(bf16, reduce fp32)`), each with and
without activation checkpointing of every block (`torch.distributed._composable.checkpoint`): the
allocator's peak over three steps (`torch.cuda.max_memory_allocated`) against
`srift.domain.sharding.strategy_memory` (less the CUDA context and NCCL's buffers, which the allocator does
not see), and the mean step time against the estimated profile's forward + backward + update. What the CPU
validation does not run is here: mixed precision, checkpointing, the 1 B model's memory. Hybrid sharding
needs two nodes.

`--device cpu` exercises the script on the validation's blocks model in fp32 (a test runs it): memory by
glibc's mallinfo2 as probes/ddp_train.py measures it, no step-time comparison.

`--rescore REPORT` runs nothing: it re-scores a stored report's measured peaks with the memory model as it
is now (a modelling change is judged on the stored measurement before and after; check-only data, fitted
into nothing) and prints the table.

    python -m benchmarks.gpu_sharded_check                  # on a GPU: writes its section
    python -m benchmarks.gpu_sharded_check --device cpu --no-write
    python -m benchmarks.gpu_sharded_check --rescore docs/images/gpu/h200-sharded.json
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from srift.bandwidth.local_probe import free_port
from srift.domain.memory import Optimizer
from srift.domain.sharding import MemoryBasis, Setup, Strategy, fsdp_units, memory_basis, strategy_memory

REPO = Path(__file__).resolve().parent.parent
STRATEGIES = (Strategy.DDP, Strategy.ZERO1, Strategy.ZERO2, Strategy.FULL_SHARD)
STEPS = 3


def _probe() -> Any:
    sys.path.insert(0, str(REPO / "probes"))
    import ddp_train

    return ddp_train


def _blocks(model: nn.Module) -> list[nn.Module]:
    return list(_probe()._repeated_blocks(model))


def _build(factory: Any, setup: Setup, *, device: torch.device, mixed: bool) -> tuple[nn.Module, Any]:
    from torch.distributed._composable import checkpoint
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    with torch.device("meta"):
        model = factory()
    if setup.checkpointing:
        for block in _blocks(model):
            checkpoint(block)
    if setup.strategy.sharded:
        policy = (
            MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed else None
        )
        options: dict[str, Any] = {"reshard_after_forward": setup.strategy.reshards_after_forward}
        if policy is not None:
            options["mp_policy"] = policy
        for block in _blocks(model):
            fully_shard(block, **options)
        fully_shard(model, **options)
    model.to_empty(device=device)
    with torch.no_grad():
        for module in model.modules():
            reset = getattr(module, "reset_parameters", None)
            if callable(reset):
                reset()
    # One rank: DDP's wrapper would add its buckets, which the memory model (and a one-GPU user) leaves out.
    net: Any = model
    params = list(net.parameters())
    if setup.strategy is Strategy.ZERO1:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return net, ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, lr=1e-5)
    return net, torch.optim.AdamW(params, lr=1e-5)


def run_setup(
    factory: Any, inputs: Any, setup: Setup, *, device: torch.device, mixed: bool
) -> dict[str, Any]:
    """Three steps of one setup: the peak memory over what was in use before the model, the mean step."""
    probe = _probe()
    cuda = device.type == "cuda"
    gc.collect()  # the previous setup's modules hold reference cycles: free them before the baseline
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    else:
        base = probe._in_use_bytes()
    net, opt = _build(factory, setup, device=device, mixed=mixed)
    cast = torch.autocast(device.type, dtype=torch.bfloat16) if mixed and not setup.strategy.sharded else None
    times = []
    peak = 0

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with cast if cast is not None else contextlib.nullcontext():
            out = net(inputs)
        loss = out if out.ndim == 0 else out.float().pow(2).mean()
        loss.float().backward()
        opt.step()
        if cuda:
            torch.cuda.synchronize(device)

    for _ in range(STEPS):
        start = time.perf_counter()
        if cuda:
            step()
        else:
            peak = max(peak, probe._peak_in_use(net, step, 1, base=base))
        times.append(time.perf_counter() - start)
    if cuda:
        peak = torch.cuda.max_memory_allocated(device) - base
    return {"peak_bytes": int(peak), "step_s": statistics.fmean(times[1:])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (exercise it)")
    parser.add_argument("--batch", type=int, default=None, help="per-GPU batch (cuda 2, cpu 8)")
    parser.add_argument("--out", default=None, help="write the JSON report here")
    parser.add_argument("--no-write", action="store_true", help="do not write docs/BENCHMARKS.md")
    parser.add_argument("--rescore", default=None, help="re-score this stored report; runs nothing")
    args = parser.parse_args(argv)
    if args.rescore:
        print(rescore(json.loads(Path(args.rescore).read_text())))
        return 0
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())  # set_device refuses a bare "cuda"
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    _probe()._warm_runtime(False, "full_shard", device, None)
    if cuda:
        from srift.catalog.accelerators import spec_for_accelerator
        from srift.refmodels.llama import llama_1b as factory
        from srift.refmodels.llama import llama_input as make_input
        from srift.refmodels.shipped import reference_profiles

        name = torch.cuda.get_device_name(device)
        spec = spec_for_accelerator(name)
        llama = [p for p in reference_profiles() if p.model == "llama-1b" and p.precision.value == "bf16"]
        # The memory basis is the same on every GPU; the step estimate is this GPU's (none if not listed).
        estimate_profile = next((p for p in llama if spec is not None and p.accelerator == spec.name), None)
        profile = estimate_profile or llama[0]
        mixed, batch = True, args.batch or 2
    else:
        from srift.validation.shardmodels import blocks as factory
        from srift.validation.shardmodels import blocks_input as make_input

        name, profile, mixed, batch = "cpu", None, False, args.batch or 8
        estimate_profile = None
    basis, units = _basis(factory, make_input, profile)
    inputs = make_input(batch).to(device)
    # What the imports, the warm-up and the basis made lives to the end: one last collection, then out of
    # the cyclic collector's reach (gc.freeze), so that run_setup's collection before each baseline walks
    # only the previous setup's objects, not torch's million (0.15 s a walk on a 2-core host, eight of
    # them). Objects made from here on are collected as before.
    gc.collect()
    gc.freeze()
    rows = []
    for strategy in STRATEGIES:
        for ckpt in (False, True):
            setup = Setup(strategy, checkpointing=ckpt)
            measured = run_setup(factory, inputs, setup, device=device, mixed=mixed)
            predicted, _ = predicted_peak(basis, units, setup, batch=batch, mixed=mixed, cuda=cuda)
            rows.append(
                {
                    "setup": setup.label(),
                    "predicted_peak_bytes": int(predicted),
                    "measured_peak_bytes": measured["peak_bytes"],
                    "memory_error": (predicted - measured["peak_bytes"]) / measured["peak_bytes"]
                    if measured["peak_bytes"]
                    else None,
                    "step_s": measured["step_s"],
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    dist.destroy_process_group()
    ep = estimate_profile
    estimate = ep.forward.time_s(batch) + ep.backward.time_s(batch) + ep.update_s if ep else None
    report = {
        "device": name,
        "batch": batch,
        "mixed": mixed,
        "estimated_step_s": estimate,
        "estimate_of": ep.accelerator if ep else None,
        "rows": rows,
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if cuda and not args.no_write:
        from benchmarks._report import write_section

        lines = [
            f"{name}, llama-1b bf16, batch {batch} per GPU, one rank; estimated step (DDP) "
            f"{estimate or float('nan'):.3f} s.",
            "",
            "| setup | predicted GiB | measured GiB | error | step s |",
            "|---|---:|---:|---:|---:|",
            *(
                f"| {r['setup']} | {r['predicted_peak_bytes'] / 2**30:.2f} | "
                f"{r['measured_peak_bytes'] / 2**30:.2f} | {100 * (r['memory_error'] or 0):+.1f} % | "
                f"{r['step_s']:.3f} |"
                for r in rows
            ),
        ]
        write_section(
            "GPU check (sharded setups)", "\n".join(lines), command="python -m benchmarks.gpu_sharded_check"
        )
    return 0


def predicted_peak(
    basis: MemoryBasis, units: Any, setup: Setup, *, batch: int, mixed: bool, cuda: bool
) -> tuple[float, str]:
    """One rank's predicted peak that the allocator sees (the model's, less the CUDA context), and the
    moment it falls at."""
    from srift.domain.memory import Part

    model = strategy_memory(
        basis, units, setup, world_size=1, gpus_per_node=1, mixed=mixed, optimizer=Optimizer.ADAMW, cuda=cuda
    )
    return model.peak_bytes(batch) - model.fixed.get(Part.RESERVE, 0), model.peak_moment(batch).name


def rescore(report: dict[str, Any]) -> str:
    """A markdown table: each stored row's prediction then and now against its measured peak (GiB)."""
    from srift.refmodels.shipped import reference_profiles

    if not report.get("mixed"):
        raise SystemExit("only a GPU report (llama-1b bf16) can be re-scored")
    llama = [p for p in reference_profiles() if p.model == "llama-1b" and p.precision.value == "bf16"]
    profile = next((p for p in llama if p.accelerator == report.get("estimate_of")), llama[0])
    basis = memory_basis(profile)
    assert basis is not None
    units, batch = fsdp_units(profile), int(report["batch"])
    lines = [
        "| setup | predicted before GiB | predicted now GiB | measured GiB | error before | error now | "
        "peak moment now |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in report["rows"]:
        strategy, _, ckpt = row["setup"].partition("+")
        setup = Setup(Strategy(strategy), checkpointing=bool(ckpt))
        now, moment = predicted_peak(basis, units, setup, batch=batch, mixed=True, cuda=True)
        then, measured = row["predicted_peak_bytes"], row["measured_peak_bytes"]
        lines.append(
            f"| {row['setup']} | {then / 2**30:.2f} | {now / 2**30:.2f} | {measured / 2**30:.2f} | "
            f"{100 * (then - measured) / measured:+.1f} % | {100 * (now - measured) / measured:+.1f} % | "
            f"{moment} |"
        )
    return "\n".join(lines)


def _basis(factory: Any, make_input: Any, profile: Any) -> tuple[MemoryBasis, Any]:
    """The memory basis and FSDP units: the reference profile's on a GPU; on a CPU the blocks model counted
    on fake tensors, with its blocks' facts."""
    if profile is not None:
        basis = memory_basis(profile)
        assert basis is not None
        return basis, fsdp_units(profile)
    from srift.domain.profile import ComputeCurve, LayerGrad, ModelProfile
    from srift.profiling.structure import count_structure
    from srift.refmodels.blocks import count_blocks

    structure = count_structure(factory, make_input, fake=True)
    layers = tuple(
        LayerGrad(x.name, x.grad_bytes, 1.0 - x.backward_order / len(structure.layers))
        for x in structure.layers
        if x.grad_bytes > 0
    )
    stand_in = ModelProfile(
        model="blocks", accelerator="cpu", max_batch=64, forward=ComputeCurve((1,), (0.01,)),
        backward=ComputeCurve((1,), (0.02,)), layers=layers, straggler_cv=0.0,
    )  # fmt: skip
    # A CPU rank's update holds two temporaries of the largest parameter (srift.domain.memory).
    largest = max(p.numel() * p.element_size() for p in factory().parameters())
    basis = MemoryBasis(
        parameter_bytes=structure.memory.parameter_bytes,
        activation_bytes=structure.memory.activation_bytes,
        source="counted (fake tensors)",
        blocks=count_blocks(factory, make_input),
        largest_parameter_bytes=largest,
    )
    return basis, fsdp_units(stand_in)


if __name__ == "__main__":
    sys.exit(main())
