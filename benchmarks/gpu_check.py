"""The GPU check: Srift's CUDA path on one real GPU, in one script of a few minutes.

For ResNet-50, BERT-base and GPT-2 small (`srift.refmodels`) at fp32, tf32 and bf16 it

1. profiles the model (`srift profile`'s `profile_model` on the device, the largest batch capped by
   `--max-batch` so the run fits its budget) and compares each measured step time (forward + backward) at the
   profile's breakpoints with the estimator's figure for this GPU computed without it (`estimate:roofline`
   from the model's structure and the GPU's spec);
2. at fp32, checks the training memory model: the activation line through two small batches predicts the
   allocator's peak at three larger batches and the largest batch, which the search then confirms on the
   device (`srift.profiling.search`), with the caching allocator's reserved-over-allocated ratio at the
   largest (what `srift.domain.memory.MARGIN_FRACTION` must cover);
3. runs probes/ddp_train.py under NCCL on one rank (torchrun) and probes/allreduce.py on every GPU of the
   machine (one rank: `--allow-one-rank`);

and writes its section of docs/BENCHMARKS.md ("GPU check", or "GPU check (cpu)" with `--device cpu`) and a
JSON report (`--out`). It installs nothing beyond `make install`. `--device cpu` runs the same steps on the
CPU (gloo probes, `--spec` names the GPU whose estimate to compare with), so the tests exercise it.

`--rescore REPORT` runs nothing on a device: it recomputes the estimate of every step of a stored report's
profiles with the code and calibration as they are now (the structure counted afresh on the CPU, as the
profile counted it) and prints estimate / measured, stored and now, beside each other.

    .venv/bin/python -m benchmarks.gpu_check --out gpu_check.json          # on a GPU machine, ~5 min
    .venv/bin/python -m benchmarks.gpu_check --device cpu --models cnn --precisions fp32 --spec T4 \\
        --max-batch 8 --no-write
    .venv/bin/python -m benchmarks.gpu_check --rescore docs/images/gpu/h200-gpu-check.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODELS = {
    "resnet50": ("srift.refmodels.nets:resnet50", "srift.refmodels.nets:image_input"),
    "bert-base": ("srift.refmodels.nets:bert_base", "srift.refmodels.nets:bert_input"),
    "gpt2-small": ("srift.refmodels.nets:gpt2_small", "srift.refmodels.nets:gpt2_input"),
    "cnn": ("srift.profiling.testmodels:cnn", "srift.profiling.testmodels:cnn_input"),
    "transformer": ("srift.profiling.testmodels:transformer", "srift.profiling.testmodels:transformer_input"),
    "wide_mlp": ("srift.profiling.testmodels:wide_mlp", "srift.profiling.testmodels:wide_mlp_input"),
}
DEFAULT_MODELS = ("resnet50", "bert-base", "gpt2-small")
DEFAULT_PRECISIONS = ("fp32", "tf32", "bf16")
WITHIN = 0.15
"""`--rescore` counts the rows at their largest batch whose estimate is within this share of the measured
step (issue #55's target for a GPU the fit never saw)."""
DEFAULT_BUDGET_S = 420.0
"""Stop starting new steps after this many seconds (the check's target is under 8 minutes on one GPU)."""


def _load(spec: str) -> Callable[..., Any]:
    from srift.profiling.loading import resolve_callable

    return resolve_callable(spec, what="factory", field="model")


def _gpu_spec(name: str | None, device: str) -> Any:
    """The spec called `name` (NotFound, naming the close ones, when none is), else `device`'s."""
    from srift.catalog.accelerators import spec_named

    return spec_named(name) if name else _device_spec(device)


def _device_spec(device: str) -> Any:
    """The spec of the GPU `device` names (None on the CPU or for a GPU the specs do not know)."""
    from srift.catalog.accelerators import spec_for_accelerator

    if device.startswith("cuda"):
        import torch

        return spec_for_accelerator(torch.cuda.get_device_name(torch.device(device)))
    return None


def profile_row(name: str, precision: str, *, device: str, max_batch: int, spec: Any) -> dict[str, Any]:
    """Profile `name` in `precision` and compare its step times with the roofline estimate for `spec`."""
    from srift.estimate.estimator import estimate_profile, measured_strict_fp32
    from srift.profiling.profiler import profile_model

    factory, inputs = MODELS[name]
    started = time.perf_counter()
    prof = profile_model(
        _load(factory),
        _load(inputs),
        device=device,
        precision=precision,
        max_batch=max_batch,
        repeats=3,
        warmup=1,
        iterations=5,
        refine=False,
        model_name=name,
    )
    row: dict[str, Any] = {
        "model": name,
        "precision": precision,
        "accelerator": prof.accelerator,
        "max_batch": prof.max_batch,
        "float32_math": prof.extra.get("float32_math"),
        "profile_s": round(time.perf_counter() - started, 1),
        "steps": [{"batch": b, "measured_s": round(prof.compute_s(b), 6)} for b in prof.forward.batches],
    }
    if spec is not None and prof.structure is not None:
        made = estimate_profile(
            model=name,
            structure=prof.structure,
            spec=spec,
            precision=prof.precision,
            strict_fp32=measured_strict_fp32(prof),
        )
        row["spec"] = spec.name
        if made.profile is not None:
            for step in row["steps"]:
                estimated = made.profile.compute_s(step["batch"])
                step["estimated_s"] = round(estimated, 6)
                step["estimate_over_measured"] = round(estimated / step["measured_s"], 4)
        else:
            row["estimate_note"] = made.note
    return row


def rescore_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every step of `report`'s profiles with the estimate recomputed now (`--rescore`): the model's
    structure counted afresh in the row's precision, `estimate:roofline` for the report's spec, its float32
    convolutions as the row's `float32_math` records cuDNN's (IEEE float32 for a strict-fp32 run).

    `pooled_s` is the same estimate without the model's factor (the shipped efficiencies alone, as a
    model the public table lacks is estimated): the factors are fitted on the table's implementation of
    the model (NVIDIA DeepLearningExamples), so the two columns tell the structure's share of an error
    from the factor's."""
    from dataclasses import replace

    from srift.catalog.accelerators import spec_named
    from srift.domain.structure import Precision
    from srift.estimate.calibration import shipped_calibration
    from srift.estimate.estimator import estimate_profile
    from srift.profiling.structure import count_structure

    spec = spec_named(report["spec"])
    without_factors = replace(shipped_calibration(), factors={})
    out = []
    for row in report["profiles"]:
        factory, inputs = MODELS[row["model"]]
        precision = Precision(row["precision"])
        structure = count_structure(_load(factory), _load(inputs), precision=precision)
        strict = (row.get("float32_math") or {}).get("cudnn") == "ieee"
        made, pooled = (
            estimate_profile(
                model=row["model"],
                structure=structure,
                spec=spec,
                precision=precision,
                strict_fp32=strict,
                calibration=calibration,
            ).profile
            for calibration in (None, without_factors)
        )
        for step in row["steps"]:
            out.append(
                {
                    "model": row["model"],
                    "precision": row["precision"],
                    "batch": step["batch"],
                    "largest": step["batch"] == row["max_batch"],
                    "measured_s": step["measured_s"],
                    "stored_estimated_s": step.get("estimated_s"),
                    "estimated_s": made.compute_s(step["batch"]) if made is not None else None,
                    "pooled_s": pooled.compute_s(step["batch"]) if pooled is not None else None,
                    "forward_ops": structure.forward.kernels,
                    "backward_ops": structure.backward.kernels,
                    "unaligned_share": structure.unaligned_share(step["batch"]),
                }
            )
    return out


def parameter_numels(model: str) -> list[int]:
    """Elements of each trainable parameter tensor of a reference model, built on the meta device (no
    memory, no arithmetic), in `model.parameters()` order, as the optimizer receives them."""
    import torch

    factory, _ = MODELS[model]
    with torch.device("meta"):
        net = _load(factory)()
    return [p.numel() for p in net.parameters() if p.requires_grad]


def host_floor_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The host floor (`srift.estimate.host`) of each row at batch 1 against its measured step, and the
    AdamW step (foreach, CUDA's default) over the model's parameter tensors."""
    from srift.estimate.calibration import shipped_calibration
    from srift.estimate.host import CUDA_LAUNCH_S, HostCost, adamw_launches

    cost = HostCost(dispatch_s=shipped_calibration().efficiency.kernel_s)
    lines = [
        f"Host floor at batch 1 (`srift.estimate.host`): operators × ({1e6 * cost.dispatch_s:.2f} µs "
        f"measured eager dispatch + {1e6 * CUDA_LAUNCH_S:.2f} µs cited cudaLaunchKernel); the measured step "
        "is forward + backward (the profiler's CUDA events), so the optimizer is not in it. AdamW: its "
        "step as `torch.optim.AdamW` runs it on CUDA by default (foreach, 32 KB kernel arguments), host "
        "floor only.",
        "",
        "| model | precision | forward ops | backward ops | host floor | measured step | floor / measured | "
        "measured µs per op | AdamW tensors | AdamW launches | AdamW host floor |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    numels: dict[str, list[int]] = {}
    for r in rows:
        if r["batch"] != 1:
            continue
        ops = r["forward_ops"] + r["backward_ops"]
        floor_s = cost.pass_s(r["forward_ops"]) + cost.pass_s(r["backward_ops"])
        tensors = numels.setdefault(r["model"], parameter_numels(r["model"]))
        lines.append(
            f"| {r['model']} | {r['precision']} | {r['forward_ops']} | {r['backward_ops']} | "
            f"{1e3 * floor_s:.2f} ms | {1e3 * r['measured_s']:.2f} ms | {floor_s / r['measured_s']:.2f} | "
            f"{1e6 * r['measured_s'] / ops:.1f} | {len(tensors)} | {adamw_launches(tensors)} | "
            f"{1e6 * cost.adamw_s(tensors):.0f} µs |"
        )
    return lines


def rescore(report: dict[str, Any]) -> str:
    """A table of `rescore_rows`: estimate / measured as stored and as the code computes it now."""
    lines = [
        f"Rescored {report.get('device_name')} report (spec {report['spec']}, torch {report.get('torch')}): "
        "`estimate:roofline` from the structure counted now and the shipped calibration, no device run.",
        "",
        "| model | precision | batch | measured step | estimate (stored) | estimate (now) | "
        "stored / measured | now / measured | now, no model factor / measured |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = rescore_rows(report)
    for r in rows:
        stored, now, measured = r["stored_estimated_s"], r["estimated_s"], r["measured_s"]
        pooled = r["pooled_s"]
        cells = [
            f"{1000 * stored:.2f} ms" if stored else "–",
            f"{1000 * now:.2f} ms" if now else "–",
            f"{stored / measured:.2f}" if stored else "–",
            f"{now / measured:.2f}" if now else "–",
            f"{pooled / measured:.2f}" if pooled else "–",
        ]
        lines.append(
            f"| {r['model']} | {r['precision']} | {r['batch']}{' (largest)' if r['largest'] else ''} | "
            f"{1000 * measured:.2f} ms | " + " | ".join(cells) + " |"
        )
    largest = [r for r in rows if r["largest"] and r["estimated_s"]]
    within = [
        f"{r['model']} {r['precision']}"
        for r in largest
        if abs(r["estimated_s"] / r["measured_s"] - 1) <= WITHIN
    ]
    pooled_within = [
        f"{r['model']} {r['precision']}"
        for r in largest
        if r["pooled_s"] and abs(r["pooled_s"] / r["measured_s"] - 1) <= WITHIN
    ]
    lines += [
        "",
        f"At the largest measured batch, {len(within)} of {len(largest)} model/precision rows are within "
        f"{100 * WITHIN:.0f} % now" + (f" ({', '.join(within)})" if within else "") + "; without the "
        f"models' factors {len(pooled_within)}"
        + (f" ({', '.join(pooled_within)})" if pooled_within else "")
        + ". The factors (ResNet-50 and BERT-base) are fitted on the public table's runs of NVIDIA "
        "DeepLearningExamples' implementations; this report ran Srift's reference models in plain PyTorch.",
        "",
        unaligned_line(largest),
        "",
        *host_floor_lines(rows),
    ]
    return "\n".join(lines)


def unaligned_line(rows: list[dict[str, Any]]) -> str:
    """Which rows do fp16/bf16 matrix products with a leading dimension off cuBLAS's 16-byte alignment, and
    their share of the step's counted FLOPs (`ModelStructure.unaligned_share`): recorded, not priced apart."""
    hits = [
        f"{r['model']} {r['precision']} {100 * r['unaligned_share']:.3g} %"
        for r in rows
        if r["unaligned_share"] > 0
    ]
    return (
        "Half-precision matrix products whose leading dimension is not a multiple of 16 bytes (cuBLAS's "
        "tensor-core alignment; `srift.domain.structure.UNALIGNED_BYTES`), as a share of the step's counted "
        "FLOPs at the largest batch: "
        + (", ".join(hits) if hits else "none")
        + ". The estimate prices them like every other matrix product: the public operator-level figures "
        'searched on 2026-12-07 (docs/gpu.md, "Unaligned half-precision products") give no rate per GPU '
        "architecture for such products, and none of this report's figures is fitted."
    )


def memory_row(name: str, *, device: str, cap: int) -> dict[str, Any]:
    """The training memory model against the allocator on `device` (see the module docstring, step 2):
    the largest batch found (on CUDA: the model's, confirmed), the activation line through ⅛ and ¼ of it,
    its predicted peaks at ½, ¾ and all of it against the measured ones, and on CUDA the largest batch the
    line predicts under the device's memory."""
    import torch

    from srift.domain.memory import Optimizer, training_memory
    from srift.profiling.bench import Progress, build_bench, trainable_bytes
    from srift.profiling.peak import fit_activations, gradient_bytes, step_peak
    from srift.profiling.search import search_max_batch

    factory, inputs = MODELS[name]
    dev = torch.device(device)
    if dev.type == "cuda":
        # "cuda" without an index: set_device refuses it (torch 2.11), so name the current device.
        dev = torch.device("cuda", torch.cuda.current_device() if dev.index is None else dev.index)
        torch.cuda.set_device(dev)
    bench = build_bench(_load(factory), _load(inputs), None, dev)
    search = search_max_batch(
        bench, cap=cap, budget_bytes=None, report=Progress(None), optimizer=Optimizer.ADAM
    )
    top = search.max_batch
    fit_batches = sorted({max(1, top // 8), max(2, top // 4)})
    grads = gradient_bytes(bench)
    line = fit_activations([step_peak(bench, bench.inputs(b), b) for b in fit_batches], gradient_bytes=grads)
    checks = []
    for b in sorted({max(3, top // 2), max(3, 3 * top // 4), top}):
        if b > top or b in fit_batches:
            continue
        got = step_peak(bench, bench.inputs(b), b)
        predicted = grads + max(line.at(b), 0.0)
        checks.append(
            {
                "batch": b,
                "measured_bytes": got.peak_bytes,
                "predicted_bytes": round(predicted),
                "error": round(predicted / got.peak_bytes - 1.0, 4),
                **(
                    {"reserved_over_allocated": round(got.reserved_bytes / got.peak_bytes, 4)}
                    if got.reserved_bytes
                    else {}
                ),
            }
        )
    row: dict[str, Any] = {
        "model": name,
        "activation_bytes": line.to_list(),
        "fit_batches": fit_batches,
        "checks": checks,
        "search_max_batch": top,
        "search_method": search.method,
    }
    if dev.type == "cuda":
        params = [p for p in bench.model.parameters() if p.requires_grad]
        model = training_memory(
            parameter_bytes=trainable_bytes(bench.model),
            activation_bytes=line,
            optimizer=Optimizer.ADAM,
            cuda=True,
            distributed=False,
            largest_parameter_bytes=max(p.numel() * p.element_size() for p in params),
        )
        total = torch.cuda.get_device_properties(dev).total_memory
        row["model_max_batch"] = model.largest_batch(total, cap=cap)
        row["device_memory_bytes"] = total
    return row


def _torchrun(script: str, args: list[str], *, nproc: int, timeout_s: float) -> dict[str, Any]:
    """Run a probe under torchrun on this machine; its rank 0 JSON (the last JSON line of --out)."""
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        out = Path(tmp) / "out.json"
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
            str(ROOT / "probes" / script), *args, "--out", str(out),
        ]  # fmt: skip
        env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
        started = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
        took = round(time.perf_counter() - started, 1)
        if done.returncode != 0 or not out.exists():
            return {"ok": False, "returncode": done.returncode, "stderr": done.stderr[-1500:], "took_s": took}
        lines = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
        return {"ok": True, "took_s": took, "result": lines if len(lines) > 1 else lines[0]}


def probe_rows(*, device: str) -> dict[str, Any]:
    """probes/ddp_train.py on one rank and probes/allreduce.py over the machine's GPUs (on a CPU one gloo
    rank, `--allow-one-rank`: the path a one-GPU machine takes; two-rank gloo runs of the probe are
    tests/bandwidth/test_probe_script.py's, and a rank's torch import costs a 2-core host seconds)."""
    cuda = device.startswith("cuda")
    backend = "nccl" if cuda else "gloo"
    model, inputs = MODELS["cnn"]
    ddp = _torchrun(
        "ddp_train.py",
        ["--model", model, "--input", inputs, "--batch", "32", "--iters", "10", "--warmup", "2",
         "--backend", backend],
        nproc=1,
        timeout_s=180,
    )  # fmt: skip
    gpus = 0
    if cuda:
        import torch

        gpus = torch.cuda.device_count()
    ranks = max(gpus, 1)
    allreduce = _torchrun(
        "allreduce.py",
        ["--backend", backend, "--sizes", "4,1M,64M" if cuda else "4,4K", "--repeats", "3", "--warmup", "2",
         "--ifname", "lo", "--time-budget-s", "60", *(["--allow-one-rank"] if ranks == 1 else [])],
        nproc=ranks,
        timeout_s=180,
    )  # fmt: skip
    return {"ddp_train": ddp, "allreduce": allreduce, "allreduce_ranks": ranks}


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Device: {report['device_name']} ({report['device']}), torch {report['torch']}, "
        f"{report['elapsed_s']:.0f} s. Estimates: `estimate:roofline` for {report.get('spec') or 'no spec'}, "
        "computed from the model's structure without the measured profile."
        + (
            " On a CPU this only exercises the script: its times are a loaded CPU's, the estimate a GPU's."
            if report["device"] == "cpu"
            else ""
        ),
        "",
        "| model | precision | max batch (cap) | batch | measured step | estimate | estimate / measured |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["profiles"]:
        for step in row["steps"]:
            est = step.get("estimated_s")
            lines.append(
                f"| {row['model']} | {row['precision']} | {row['max_batch']} | {step['batch']} | "
                f"{1000 * step['measured_s']:.2f} ms | "
                + (f"{1000 * est:.2f} ms | {step['estimate_over_measured']:.2f} |" if est else "– | – |")
            )
    lines += [
        "",
        "Training memory (fp32, Adam; the activation line through ⅛ and ¼ of the largest batch predicts a "
        "step's peak growth at ½, ¾ and all of it, against the allocator's):",
        "",
        "| model | batch | measured | predicted | error | reserved / allocated |",
        "|---|---|---|---|---|---|",
    ]
    for row in report["memory"]:
        for c in row["checks"]:
            lines.append(
                f"| {row['model']} | {c['batch']} | {c['measured_bytes'] / 2**20:.1f} MiB | "
                f"{c['predicted_bytes'] / 2**20:.1f} MiB | {100 * c['error']:+.1f} % | "
                f"{c.get('reserved_over_allocated', '–')} |"
            )
        if "model_max_batch" in row:
            lines.append(
                f"| {row['model']} | largest: model {row['model_max_batch']}, confirmed "
                f"{row['search_max_batch']} | | | | |"
            )
    probes = report.get("probes", {})
    ddp, ar = probes.get("ddp_train", {}), probes.get("allreduce", {})
    ddp_text = (
        f"median iteration {1000 * ddp['result']['median_iter_s']:.2f} ms" if ddp.get("ok") else "failed"
    )
    ar_text = "ran" if ar.get("ok") else "failed"
    lines += [
        "",
        f"probes/ddp_train.py ({report['backend']}, one rank): {ddp_text}. probes/allreduce.py "
        f"({report['backend']}, {probes.get('allreduce_ranks')} rank(s)): {ar_text}.",
    ]
    if report["skipped"]:
        lines += ["", "Skipped for the time budget: " + ", ".join(report["skipped"]) + "."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (exercise the check)")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help=f"of {', '.join(MODELS)}")
    parser.add_argument("--precisions", default=",".join(DEFAULT_PRECISIONS))
    parser.add_argument("--max-batch", type=int, default=None, help="cap of the profiles (cuda 256, cpu 8)")
    parser.add_argument("--memory-cap", type=int, default=None, help="cap of the memory search (cuda 4096)")
    parser.add_argument("--spec", default=None, help="GPU spec to estimate for (default: this GPU's)")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S)
    parser.add_argument("--out", default=None, help="write the JSON report here")
    parser.add_argument("--no-write", action="store_true", help="do not write docs/BENCHMARKS.md")
    parser.add_argument(
        "--rescore", default=None, help="re-estimate this stored report's steps; runs nothing"
    )
    args = parser.parse_args(argv)
    from srift.catalog.accelerators import spec_named
    from srift.errors import SriftError

    try:  # a mistyped --spec fails at once, before torch is imported
        named = spec_named(args.spec) if args.spec else None
    except SriftError as e:  # its message names the close spec names
        print(f"error: --spec: {e}", file=sys.stderr)
        return 2
    if args.rescore:
        text = rescore(json.loads(Path(args.rescore).read_text()))
        print(text)
        if not args.no_write:
            from benchmarks._report import write_section

            command = f"python -m benchmarks.gpu_check --rescore {args.rescore}"
            write_section("GPU check (rescored)", text, command=command)
        return 0

    import torch

    started = time.perf_counter()
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print(
            "error: no CUDA device here. To fix: run on a GPU machine, or pass --device cpu.", file=sys.stderr
        )
        return 2
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        print(f"error: unknown models {unknown}. To fix: use some of {', '.join(MODELS)}.", file=sys.stderr)
        return 2
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    cap = args.max_batch or (256 if cuda else 8)
    memory_cap = args.memory_cap or (4096 if cuda else 16)
    spec = named or _device_spec(args.device)
    report: dict[str, Any] = {
        "device": args.device,
        "device_name": torch.cuda.get_device_name(torch.device(args.device)) if cuda else "cpu",
        "torch": torch.__version__,
        "backend": "nccl" if cuda else "gloo",
        "spec": spec.name if spec is not None else None,
        "profiles": [],
        "memory": [],
        "skipped": [],
    }

    def budget_left() -> bool:
        return time.perf_counter() - started < args.budget_s

    def save() -> None:
        """Write the report so far: a run cut short (a device's time limit) still leaves its rows."""
        report["elapsed_s"] = round(time.perf_counter() - started, 1)
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=2) + "\n")

    # torch._dynamo is imported by the first optimizer step or fake tensor in any case; imported here, one
    # collection and gc.freeze keep torch's million objects out of the walks of the profiler's collections
    # (no_gc, loop_overhead: 0.16 s a walk on a 2-core host, two per profile). Objects made from here on
    # are collected as before.
    import torch._dynamo

    gc.collect()
    gc.freeze()
    for name in models:
        for precision in precisions:
            if not budget_left():
                report["skipped"].append(f"profile {name} {precision}")
                continue
            report["profiles"].append(
                profile_row(name, precision, device=args.device, max_batch=cap, spec=spec)
            )
            save()
            print(f"profiled {name} {precision}", file=sys.stderr, flush=True)
    for name in models:
        if not budget_left():
            report["skipped"].append(f"memory {name}")
            continue
        report["memory"].append(memory_row(name, device=args.device, cap=memory_cap))
        save()
        print(f"memory {name}", file=sys.stderr, flush=True)
    report["probes"] = probe_rows(device=args.device)
    save()
    print(_markdown(report))
    if not args.no_write:
        from benchmarks._report import write_section

        command = " ".join([".venv/bin/python -m benchmarks.gpu_check", *(argv or sys.argv[1:])])
        write_section("GPU check" if cuda else "GPU check (cpu)", _markdown(report), command=command)
    probes_ok = report["probes"]["ddp_train"].get("ok") and report["probes"]["allreduce"].get("ok")
    return 0 if probes_ok else 1


if __name__ == "__main__":
    sys.exit(main())
