"""Lambda's per-run logs as scaling series: steady-state step times of 1–8 GPU runs, checked, never fitted.

The summary table Srift calibrates on (`srift.estimate.public`) gives one throughput per system; the same
repository (lambdal/deeplearning-benchmark, pytorch/results*/<system>/PyTorch_<model>_<precision>/*.txt)
keeps the raw log of every run behind it and of many runs that never reached the table. Those logs print a
rate per iteration, so a run's steady-state step time can be read off its log, and runs of one series (one
machine, its GPU count prefix dropped: `2xA100_80GB_SXM4_v1` → `A100_80GB_SXM4_v1`) at one per-GPU batch pair
into scaling efficiencies t_1 / t_N. The shipped extract is `srift/estimate/data/lambdal_runs.csv` (its
header cites the commit and every mapping; benchmarks/extract_lambdal_runs.py writes it), read through the
measurement registry as a `fit` set: `link_efficiencies` takes η, the single-node DDP efficiency the simulator
does not explain, from its pairs (`srift.sim.node_scaling`).

What a log gives (`parse_log`):
- BERT-base SQuAD (NVIDIA DeepLearningExamples run_squad.py): tqdm's progress bar, whose rate is an
  exponential moving average of recent iterations (tqdm's default smoothing 0.3), not one iteration's time;
  the median over iterations from `STEADY_FROM_ITERATION` on in each epoch's bar (the average restarts with
  each bar) is the step time. The harness's own figure, `training_sequences_per_second` (global batch ×
  steps / wall time from train start, warm-up included), is kept beside it where the log prints it.
- ResNet-50 (DeepLearningExamples ConvNets main.py with `--print-freq 1`): one DLLogger line per iteration
  with `train.total_ips`, the node's images/s of that iteration; step time = global batch / that, median over
  the run's iterations from the `STEADY_FROM_ITERATION`th on (counted across epochs). The harness's figure
  is the run's `Summary:` `train.total_ips` (the mean over all iterations, warm-up included).

`series_cases` pairs the runs; `hardware_spreads` shows how far series of the same GPU model, link, model
and precision disagree with one another at one GPU count: run-to-run variation that no model of the hardware
can follow.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from srift.domain.catalog import Interconnect
from srift.domain.structure import Precision
from srift.errors import ConfigurationError
from srift.estimate.public import LAMBDA_COLUMNS, EfficiencyGap, Row, csv_rows
from srift.measurements import Registry, Use, shipped_registry

TABLE_COPY = "estimate/data/lambdal_runs.csv"
"""The extracted runs as the measurement registry names them (relative to the srift package)."""
SET_ID = "lambdal-raw-runs"
"""The registry's set that lists every run of the copy (use: fit, the node efficiency η)."""
SOURCE = (
    "lambdal/deeplearning-benchmark pytorch/results*/<system>/PyTorch_{bert_base_squad,resnet50}_*/*.txt "
    "(srift/estimate/data/lambdal_runs.csv; commit in its header)"
)
STEADY_FROM_ITERATION = 20
"""Iterations before this one (per epoch) are warm-up (cuDNN autotuning, first allocations, tqdm's average
still settling) and left out of the steady-state median; the choice was made before any efficiency was
computed and is not tuned to them."""
WITHIN_POINTS = 5.0
"""Issue #55: predicted efficiency within this many points of the published one."""

MODEL_OF_DIR = {"bert_base_squad": "bert-base", "resnet50": "resnet50"}
"""The harness's model directory name → Srift's reference model."""

_TQDM = re.compile(r"(\d+)/(\d+) \[[0-9:]+<[0-9:?]+, +([0-9.]+)(it/s|s/it)\]")
_BERT_BATCH = re.compile(r"train_batch_size : (\d+)")
_BERT_BATCH_ARG = re.compile(r"--train_batch_size[= ](\d+)")
_BERT_E2E = re.compile(r"training_sequences_per_second : ([0-9.]+)")
_BERT_MAX_STEPS = re.compile(r"--max_steps[= ](\d+)")
_RESNET_ITER = re.compile(
    r"Epoch: (\d+) Iteration: (\d+) .*?train\.total_ips : ([0-9.]+) (?:images|img)/s", re.MULTILINE
)
_RESNET_SUMMARY = re.compile(r"Summary: .*?train\.total_ips : ([0-9.]+) (?:images|img)/s")
_RESNET_BATCH = re.compile(r"'--batch-size', '(\d+)'|batch_size : (\d+) ")


@dataclass(frozen=True, slots=True)
class ParsedLog:
    """What one run's log says: per-GPU batch, the steady-state step time, how many iterations it is the
    median of, and the harness's own samples/s (nan if absent)."""

    per_gpu_batch: int
    step_s: float
    timed_steps: int
    harness_samples_per_s: float
    iterations_run: int
    """Iterations the log shows (BERT: the last count of each epoch's bar; ResNet-50: iteration lines)."""
    max_steps: int | None
    """run_squad.py's --max_steps (None for ResNet-50): its training_sequences_per_second assumes they ran."""


def _last_int(pattern: re.Pattern[str], text: str) -> int | None:
    found = pattern.findall(text)
    return int(found[-1]) if found else None


def _unparsable(what: str) -> ConfigurationError:
    return ConfigurationError(
        f"the log has no {what}",
        hint="pass a complete run log of DeepLearningExamples' run_squad.py or ConvNets main.py as Lambda's "
        "benchmark wrote it",
        field="log",
    )


def parse_bert_log(text: str) -> ParsedLog:
    """A BERT SQuAD run's log (module docstring): tqdm's smoothed rate, median from `STEADY_FROM_ITERATION`
    on in each epoch's bar (the last line printed for each iteration; not a bar's closing line, which
    averages its whole epoch), as seconds per step."""
    text = text.replace("\r", "\n")
    rate_of: dict[tuple[int, int], float] = {}
    last_of: dict[int, int] = {}
    epoch, previous = 0, 0
    for m in _TQDM.finditer(text):
        n, total, rate = int(m.group(1)), int(m.group(2)), float(m.group(3))
        if n < previous:  # tqdm starts a new bar each epoch
            epoch += 1
        previous = n
        last_of[epoch] = n
        # A bar's closing line (n == total) prints its average over the whole epoch, warm-up included.
        if STEADY_FROM_ITERATION <= n < total:
            rate_of[(epoch, n)] = rate if m.group(4) == "it/s" else 1 / rate
    if not rate_of:
        raise _unparsable(f"tqdm rate at iteration {STEADY_FROM_ITERATION} or later")
    batch = _last_int(_BERT_BATCH, text) or _last_int(_BERT_BATCH_ARG, text)
    if batch is None:
        raise _unparsable("train_batch_size")
    e2e = _BERT_E2E.findall(text)
    return ParsedLog(
        per_gpu_batch=batch,
        step_s=1 / statistics.median(rate_of.values()),
        timed_steps=len(rate_of),
        harness_samples_per_s=float(e2e[-1]) if e2e else math.nan,
        iterations_run=sum(last_of.values()),
        max_steps=_last_int(_BERT_MAX_STEPS, text),
    )


def parse_resnet_log(text: str, *, gpus: int) -> ParsedLog:
    """A ConvNets ResNet-50 run's log (module docstring) on `gpus` GPUs: per-iteration node images/s →
    global batch / images/s, median over the run's iterations from the `STEADY_FROM_ITERATION`th on (counted
    across epochs: the values are not averaged, so warm-up is once per run; runs with `--prof 20` have 19
    iterations per epoch)."""
    text = text.replace("\r", "\n")
    m = _RESNET_BATCH.search(text)
    if m is None:
        raise _unparsable("--batch-size")
    batch = int(m.group(1) or m.group(2))
    by_iteration = {(int(e), int(i)): float(x) for e, i, x in _RESNET_ITER.findall(text)}
    ips = [by_iteration[k] for k in sorted(by_iteration)][STEADY_FROM_ITERATION - 1 :]
    if not ips:
        raise _unparsable(f"train.total_ips at iteration {STEADY_FROM_ITERATION} or later")
    summary = _RESNET_SUMMARY.findall(text)
    return ParsedLog(
        per_gpu_batch=batch,
        step_s=statistics.median(batch * gpus / x for x in ips),
        timed_steps=len(ips),
        harness_samples_per_s=float(summary[0]) if summary else math.nan,
        iterations_run=len(by_iteration),
        max_steps=None,
    )


def parse_log(model_dir: str, text: str, *, gpus: int) -> ParsedLog:
    """The log of a run of the harness's model directory `model_dir` (`MODEL_OF_DIR`) on `gpus` GPUs;
    ConfigurationError when the log lacks what the module docstring says it gives."""
    if model_dir == "resnet50":
        return parse_resnet_log(text, gpus=gpus)
    if model_dir == "bert_base_squad":
        return parse_bert_log(text)
    raise ConfigurationError(
        f"no parser for model directory {model_dir!r}",
        hint=f"use one of {', '.join(sorted(MODEL_OF_DIR))}",
        field="model",
    )


@dataclass(frozen=True, slots=True)
class LoggedRun(ParsedLog):
    """One run as the shipped extract holds it (the CSV header defines each column): what its log says
    (`ParsedLog`), the system, GPU and link it ran on, and where the log came from."""

    row: str
    series: str
    system: str
    gpu: str
    gpus: int
    model: str
    precision: Precision
    harness_precision: str
    interconnect: str
    interconnect_gbps: float
    path: str
    commit: str
    sha256: str

    @property
    def samples_per_s(self) -> float:
        """The node's steady-state samples/s: global batch / step time."""
        return self.gpus * self.per_gpu_batch / self.step_s

    @property
    def harness_disagreement(self) -> float:
        """Steady-state samples/s over the harness's own figure − 1 (nan where the log prints none)."""
        return self.samples_per_s / self.harness_samples_per_s - 1

    @property
    def steps_short(self) -> bool:
        """Whether the run stopped before run_squad.py's --max_steps (its epochs ran out first): its
        training_sequences_per_second still counts max_steps steps (global batch × max_steps / time), so it
        overstates the throughput by max_steps / iterations run."""
        return self.max_steps is not None and self.iterations_run < self.max_steps

    @property
    def harness_counted_samples_per_s(self) -> float:
        """The harness's figure with the steps the run did: × iterations run / max_steps where it stopped
        short (`steps_short`), else as printed."""
        if self.max_steps is None or not self.steps_short:
            return self.harness_samples_per_s
        return self.harness_samples_per_s * self.iterations_run / self.max_steps

    def as_row(self) -> Row:
        """The run as a row of the public table, so the scaling check predicts it by the same path."""
        return Row(
            row=self.row,
            gpu=self.gpu,
            gpus=self.gpus,
            model=self.model,
            precision=self.precision,
            samples_per_s=self.samples_per_s,
            global_batch=self.gpus * self.per_gpu_batch,
            batch_from="raw log",
            interconnect=self.interconnect,
            interconnect_gbps=self.interconnect_gbps,
        )


def parse_runs(text: str) -> list[LoggedRun]:
    """The runs of an extract's CSV text (the shipped copy's format)."""
    return csv_rows(
        LoggedRun,
        text,
        **LAMBDA_COLUMNS,
        per_gpu_batch=int,
        step_s=float,
        timed_steps=int,
        harness_samples_per_s=lambda s: float(s or "nan"),
        iterations_run=int,
        max_steps=lambda s: int(s) if s else None,
    )


def read_runs(*, registry: Registry | None = None) -> list[LoggedRun]:
    """The shipped runs, read through the measurement registry: ConfigurationError when the copy's hash or
    rows are not the registry's, or when a set other than the fit set `SET_ID` lists any of them (they fit
    η, `link_efficiencies`)."""
    reg = registry or shipped_registry()
    why = "the raw-log runs fit the node efficiency η"
    return reg.read_rows(TABLE_COPY, parse_runs, use=Use.FIT, set_id=SET_ID, why=why)


def config_key(run: LoggedRun) -> tuple[str, int, str, str, int, str, float]:
    """What a prediction depends on: GPU, GPU count, model, precision, per-GPU batch and link; runs that
    share it share one prediction."""
    return (
        run.gpu,
        run.gpus,
        run.model,
        run.precision.value,
        run.per_gpu_batch,
        run.interconnect,
        run.interconnect_gbps,
    )


@dataclass(frozen=True, slots=True)
class SeriesCase(EfficiencyGap):
    """One series' N-GPU runs against its 1-GPU runs at one per-GPU batch: published efficiency t_1 / t_N
    (each t the median step time over the series' repeated runs at that count) and Srift's predicted
    thr_N / (N · thr_1) for the same node."""

    series: str
    gpu: str
    model: str
    precision: Precision
    harness_precision: str
    interconnect: str
    per_gpu_batch: int
    gpus: int
    runs_one: int
    runs_n: int
    published_efficiency: float
    predicted_efficiency: float

    @property
    def within(self) -> bool:
        return abs(self.difference_points) <= WITHIN_POINTS


def series_cases(runs: Sequence[LoggedRun], predicted_samples_per_s: Mapping[str, float]) -> list[SeriesCase]:
    """Every (series, model, harness precision, per-GPU batch) with 1-GPU runs and N-GPU runs (N > 1), one
    case per N; `predicted_samples_per_s` gives Srift's node throughput for each run's `row`. Series without
    a 1-GPU run at the same per-GPU batch are left out."""
    groups: dict[tuple[str, str, str, int], dict[int, list[LoggedRun]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in runs:
        groups[(r.series, r.model, r.harness_precision, r.per_gpu_batch)][r.gpus].append(r)
    out = []
    for (series, model, harness_precision, batch), by_count in groups.items():
        ones = by_count.get(1)
        if not ones:
            continue
        t_one = statistics.median(r.step_s for r in ones)
        p_one = predicted_samples_per_s[ones[0].row]
        for n, members in by_count.items():
            if n == 1:
                continue
            first = members[0]
            out.append(
                SeriesCase(
                    series=series,
                    gpu=first.gpu,
                    model=model,
                    precision=first.precision,
                    harness_precision=harness_precision,
                    interconnect=first.interconnect,
                    per_gpu_batch=batch,
                    gpus=n,
                    runs_one=len(ones),
                    runs_n=len(members),
                    published_efficiency=t_one / statistics.median(r.step_s for r in members),
                    predicted_efficiency=predicted_samples_per_s[first.row] / (n * p_one),
                )
            )
    return sorted(out, key=lambda c: (c.gpu, c.model, c.harness_precision, c.gpus, c.series, c.per_gpu_batch))


@dataclass(frozen=True, slots=True)
class HardwareSpread:
    """The published efficiencies of every series of one GPU model, link, model and harness precision at
    one GPU count (series at different per-GPU batches count separately)."""

    gpu: str
    interconnect: str
    model: str
    harness_precision: str
    gpus: int
    cases: tuple[SeriesCase, ...]

    @property
    def spread_points(self) -> float:
        """Largest − smallest published efficiency, in points."""
        effs = [c.published_efficiency for c in self.cases]
        return 100 * (max(effs) - min(effs))


def hardware_spreads(cases: Sequence[SeriesCase]) -> list[HardwareSpread]:
    """For each (GPU, link, model, harness precision, N) with more than one series case, the cases together
    (`HardwareSpread`), ordered by GPU, model, precision and N."""
    groups: dict[tuple[str, str, str, str, int], list[SeriesCase]] = defaultdict(list)
    for c in cases:
        groups[(c.gpu, c.interconnect, c.model, c.harness_precision, c.gpus)].append(c)
    return [
        HardwareSpread(
            gpu=gpu,
            interconnect=link,
            model=model,
            harness_precision=precision,
            gpus=n,
            cases=tuple(sorted(members, key=lambda c: c.published_efficiency)),
        )
        for (gpu, link, model, precision, n), members in sorted(groups.items())
        if len(members) > 1
    ]


MIN_PAIRS_PER_LINK = 8
"""A link class with fewer pairs than this takes the median over every pair (issue #55's form of η, fixed
before any held-out figure was seen)."""


LINK_CLASSES = tuple(link.value for link in Interconnect if link is not Interconnect.NONE)
"""The GPU link classes η is given for (a node's `srift.domain.Interconnect`, none excepted)."""


def link_efficiencies(cases: Sequence[SeriesCase]) -> dict[str, float]:
    """η per link class of `LINK_CLASSES` (`srift.sim.node_scaling`): the median over the class's pairs in
    `cases` of published efficiency / Srift's predicted efficiency (the predictions without η), or the median
    over every pair where the class has fewer than `MIN_PAIRS_PER_LINK` (none included); capped at 1.
    ConfigurationError without any pair."""
    if not cases:
        raise ConfigurationError(
            "no N-GPU run pairs with a 1-GPU run of its series",
            hint="fit η on runs that include 1-GPU runs at the N-GPU runs' per-GPU batch",
            field="runs",
        )
    ratio = [(c.interconnect, c.published_efficiency / c.predicted_efficiency) for c in cases]
    pooled = statistics.median(r for _, r in ratio)
    out = {}
    for link in sorted(LINK_CLASSES):
        mine = [r for k, r in ratio if k == link]
        out[link] = min(1.0, statistics.median(mine) if len(mine) >= MIN_PAIRS_PER_LINK else pooled)
    return out
