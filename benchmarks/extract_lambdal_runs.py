"""Extracts every BERT-base and ResNet-50 run log of lambdal/deeplearning-benchmark into srift's check data.

Reads a local clone (bare or not) of github.com/lambdal/deeplearning-benchmark at one commit, takes every
pytorch/results*/<system>/PyTorch_{bert_base_squad,resnet50}_{FP32,FP16,AMP}/*.txt whose system maps to a
Srift accelerator spec (`SYSTEMS`; the conventions of srift/estimate/data/lambdal_throughput.csv's header),
parses it (`srift.estimate.public_runs.parse_log`) and writes srift/estimate/data/lambdal_runs.csv with the
source path, commit and SHA-256 of each log. Logs of systems without a spec, and logs that do not parse, are
counted in the header by reason. Prints the registry's `rows` list and the copy's SHA-256 for
srift/data/measurements.yaml (set lambdal-raw-runs).

    python -m benchmarks.extract_lambdal_runs --repo /work/.mirror/lambdal+deeplearning-benchmark/repo
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import re
import subprocess
from collections import Counter
from pathlib import Path

from srift.errors import ConfigurationError
from srift.estimate import public_runs

OUT = Path(public_runs.__file__).resolve().parent / "data" / "lambdal_runs.csv"
LOG = re.compile(
    r"^pytorch/(results|results_v2)/([^/]+)/PyTorch_(bert_base_squad|resnet50)_(FP32|FP16|AMP)/([^/]+)\.txt$"
)
PARA = re.compile(r"^(GLOBAL_BATCH|GPU) (\d+)\s*$", re.MULTILINE)
"""benchmark.para, which the harness writes beside the logs of one model and precision (2022 on)."""
COUNT = re.compile(r"(?:^|_)(\d+)x(?=[A-Za-z0-9])")
"""The GPUs a run used: the last 'Nx' at the start of the name or after '_' and right before the GPU's name
(2x3090, 1cc_8xH100...; LambdaOD_2x_Texas_1xH100...: the VM has 2, the run used 1)."""

SYSTEMS: tuple[tuple[str, str, str, int], ...] = (
    # (pattern searched in the system name after '^' or '_' with its GPU count removed, spec, link, Gbit/s)
    (r"3090", "RTX-3090", "pcie", 252),
    (r"4090", "RTX-4090", "pcie", 252),
    (r"AdaA6000", "RTX-6000-Ada", "pcie", 252),
    (r"A6000", "RTX-A6000", "pcie", 252),
    (r"A100_80GB_SXM4", "A100-SXM4-80GB", "nvswitch", 2400),
    (r"A100_80GB_PCIe", "A100-PCIe-80GB", "pcie", 252),
    (r"A100_40GB_SXM4|A100_SXM4|A100_p4", "A100-SXM4-40GB", "nvswitch", 2400),
    (r"A100_40GB_PCIe|A100_PCIe", "A100-PCIe-40GB", "pcie", 252),
    (r"H100_80GB_SXM5", "H100-SXM5-80GB", "nvswitch", 3600),
    (r"H100_80GB_PCIe", "H100-PCIe-80GB", "pcie", 504),
    (r"H200_140GB_SXM", "H200-SXM-141GB", "nvswitch", 3600),
    (r"V100_16GB|V10016G", "V100-SXM2-16GB", "nvlink", 1200),
    (r"A10(_v1)?$", "A10", "pcie", 252),
    (r"QuadroRTX8000(_v1)?$", "Quadro-RTX-8000", "pcie", 126),
)
"""System name → Srift spec and the node's GPU-to-GPU link (per GPU, one direction). 40 GB A100s where the
name gives no memory: the 2021 runs `A100_PCIe`/`A100_SXM4` ran BERT at half the per-GPU batch of the
`A100_80GB_*` runs of the same harness, and `A100_p4` is AWS p4d (A100 SXM4 40GB). Systems with '_trt' in
the name (2020, another harness: no command line in the log) and NVLink-bridged PCIe cards (no single link
rating) are left out, as are V100 systems that do not say SXM2 16GB (`V100`, `2xV100`)."""
P3 = {"p3.2xlarge": 1, "p3.8xlarge": 4, "p3.16xlarge": 8}
"""AWS p3 (V100 SXM2 16GB, NVLink): one series, the GPU count from the instance size."""


def mapped(system: str) -> tuple[str, int, str, str, int] | None:
    """(series, GPUs, spec, link, link Gbit/s) of a system directory, or None when it maps to no spec."""
    if "_trt" in system or "NVlink" in system:
        return None
    if system in P3:
        return "AWS_p3", P3[system], "V100-SXM2-16GB", "nvlink", 1200
    counts = list(COUNT.finditer(system))
    if counts:
        last = counts[-1]
        gpus = int(last.group(1))
        series = system[: last.start(1)] + system[last.end() :]
    else:
        gpus, series = 1, system
    for pattern, spec, link, gbps in SYSTEMS:
        if re.search(rf"(^|_)({pattern})", series):
            return series, gpus, spec, (link if gpus > 1 else "none"), (gbps if gpus > 1 else 0)
    return None


def git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


HEADER = """\
# Per-run logs of Lambda's PyTorch training benchmark (github.com/lambdal/deeplearning-benchmark),
# commit {commit} ({date}): every pytorch/results*/<system>/PyTorch_{{bert_base_squad,resnet50}}_
# {{FP32,FP16,AMP}}/*.txt of a system that maps to a Srift accelerator spec; written by
# benchmarks/extract_lambdal_runs.py (its SYSTEMS: the mapping, with the conventions of
# lambdal_throughput.csv: SXM nodes NVSwitch (A100 2400, H100/H200 3600 Gbit/s per GPU, one direction)
# or V100 NVLink 1200; PCIe nodes the GPUs' PCIe generation x16, no NVLink bridges; fp32 ran with TF32
# on Ampere and later). Check data only: nothing is fitted on it (srift/data/measurements.yaml, set
# lambdal-raw-runs). Left out: {skipped}. GPU count and per-GPU batch x GPUs checked against the
# directory's benchmark.para (GPU, GLOBAL_BATCH) for the {para} runs that have one (older runs have none).
# row: system/model directory/precision directory/log file stem; series: the system without its GPU
# count (runs of one series and per-GPU batch pair into scaling efficiencies); gpu: Srift's spec; model:
# Srift's reference model; precision: fp32 or fp16 (harness_precision: the directory; FP16 = ConvNets
# --fp16 or run_squad apex O2, AMP = ConvNets --amp); per_gpu_batch: run_squad's train_batch_size,
# ConvNets' --batch-size (both per GPU).
# step_s: steady-state step time. BERT: the median of tqdm's rate (an exponential moving average, tqdm's
# smoothing 0.3, printed to 3 significant digits) over iterations >= {steady} of each epoch's bar, the
# bar's closing line left out. ResNet-50: the median of global batch / train.total_ips of each
# iteration from the run's {steady}th on (counted across epochs). timed_steps: how many iterations that
# median spans.
# harness_samples_per_s: the harness's own figure where the log prints it: BERT
# training_sequences_per_second, ResNet-50 the Summary train.total_ips (mean over all iterations); both
# include warm-up. iterations_run: iterations the log shows (BERT: the last count of each epoch's tqdm
# bar; ResNet-50: iteration lines); max_steps: run_squad.py's --max_steps (BERT only). run_squad.py
# computes training_sequences_per_second as train_batch_size x max_steps x GPUs / time, so where the
# epochs ran out first (iterations_run < max_steps) it overstates the throughput by max_steps /
# iterations_run. path and sha256: the log in the repository at the commit.
"""
COLUMNS = (
    *("row", "series", "system", "gpu", "gpus", "model", "precision", "harness_precision"),
    *("per_gpu_batch", "step_s", "timed_steps", "harness_samples_per_s", "iterations_run", "max_steps"),
    *("interconnect", "interconnect_gbps", "path", "commit", "sha256"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="a clone of lambdal/deeplearning-benchmark")
    parser.add_argument("--commit", default="HEAD")
    args = parser.parse_args()
    commit = git(args.repo, "rev-parse", args.commit).decode().strip()
    date = git(args.repo, "show", "-s", "--format=%cs", commit).decode().strip()
    names = git(args.repo, "ls-tree", "-r", "--name-only", commit, "pytorch/results", "pytorch/results_v2")
    listed = set(names.decode().split("\n"))
    rows = []
    skipped: Counter[str] = Counter()
    checked_para = 0
    for path in sorted(listed):
        m = LOG.match(path)
        if not m:
            continue
        _, system, model_dir, harness_precision, stem = m.groups()
        found = mapped(system)
        if found is None:
            skipped["no Srift spec or link rating for the system"] += 1
            continue
        series, gpus, spec, link, gbps = found
        data = git(args.repo, "show", f"{commit}:{path}")
        try:
            parsed = public_runs.parse_log(model_dir, data.decode("utf-8", "replace"), gpus=gpus)
        except ConfigurationError as e:
            skipped[f"unparsable ({e.detail})"] += 1
            continue
        para = f"{path.rsplit('/', 1)[0]}/benchmark.para"
        if para in listed:
            stated = dict(PARA.findall(git(args.repo, "show", f"{commit}:{para}").decode()))
            if (int(stated["GPU"]), int(stated["GLOBAL_BATCH"])) != (gpus, gpus * parsed.per_gpu_batch):
                skipped["benchmark.para's GPU count or global batch not the system's and the log's"] += 1
                continue
            checked_para += 1
        rows.append(
            {
                "row": f"{system}/{model_dir}/{harness_precision}/{stem}",
                "series": series,
                "system": system,
                "gpu": spec,
                "gpus": gpus,
                "model": public_runs.MODEL_OF_DIR[model_dir],
                "precision": "fp32" if harness_precision == "FP32" else "fp16",
                "harness_precision": harness_precision,
                "per_gpu_batch": parsed.per_gpu_batch,
                "step_s": f"{parsed.step_s:.6g}",
                "timed_steps": parsed.timed_steps,
                "harness_samples_per_s": ""
                if parsed.harness_samples_per_s != parsed.harness_samples_per_s
                else f"{parsed.harness_samples_per_s:.6g}",
                "iterations_run": parsed.iterations_run,
                "max_steps": "" if parsed.max_steps is None else parsed.max_steps,
                "interconnect": link,
                "interconnect_gbps": gbps,
                "path": path,
                "commit": commit,
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    text = io.StringIO()
    left_out = "; ".join(f"{n} logs: {why}" for why, n in sorted(skipped.items())) or "none"
    text.write(
        HEADER.format(
            commit=commit,
            date=date,
            skipped=left_out,
            steady=public_runs.STEADY_FROM_ITERATION,
            para=checked_para,
        )
    )
    writer = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    OUT.write_text(text.getvalue())
    print(f"wrote {OUT}: {len(rows)} runs; left out: {left_out}")
    print(f"sha256 {hashlib.sha256(OUT.read_bytes()).hexdigest()}")
    print("rows: " + json.dumps([r["row"] for r in rows], ensure_ascii=False))


if __name__ == "__main__":
    main()
