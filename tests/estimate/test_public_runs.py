"""Lambda's raw run logs: the parser on real logs, the shipped extract against them and the registry, and the
pairing of runs into scaling series."""

from __future__ import annotations

import csv
import hashlib
import math
import re
import statistics
from dataclasses import replace
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from srift.domain.structure import Precision
from srift.errors import ConfigurationError
from srift.estimate import public_runs
from srift.estimate.public_runs import LoggedRun, hardware_spreads, parse_log, read_runs, series_cases
from srift.measurements import Use, shipped_registry
from srift.testing.measurements import registry_with

LOGS = Path(__file__).parent / "data" / "lambdal_logs"
COMMIT = "aa5addb6a53675a649a80036dad548f1c27cbcc4"
V1_ONE = "pytorch/results/A100_80GB_SXM4_v1/PyTorch_bert_base_squad_FP32/19-11-2022_18-56-22.txt"
V1_TWO = "pytorch/results/2xA100_80GB_SXM4_v1/PyTorch_bert_base_squad_FP32/19-11-2022_19-48-46.txt"
OLD_ONE = "pytorch/results/A100_80GB_SXM4/PyTorch_bert_base_squad_FP32/26-11-2021_13-09-21.txt"
OLD_TWO = "pytorch/results/2xA100_80GB_SXM4/PyTorch_bert_base_squad_FP32/26-11-2021_11-45-04.txt"
RESNET_TWO = "pytorch/results/2xA100_80GB_SXM4_v1/PyTorch_resnet50_FP32/19-11-2022_20-52-16.txt"
FIXTURES = {V1_ONE: 1, V1_TWO: 2, OLD_ONE: 1, OLD_TWO: 2, RESNET_TWO: 2}


def _log(path: str) -> str:
    return (LOGS / path).read_bytes().decode("utf-8", "replace")


def _model_dir(path: str) -> str:
    return "resnet50" if "resnet50" in path else "bert_base_squad"


def test_a_bert_log_gives_its_batch_steady_rate_harness_figure_and_steps() -> None:
    parsed = parse_log("bert_base_squad", _log(V1_TWO), gpus=2)
    assert parsed.per_gpu_batch == 172
    # From iteration 20 on, tqdm prints 1.21 or 1.22 it/s, mostly 1.22 (the log's own lines).
    assert parsed.step_s == pytest.approx(1 / 1.22)
    assert parsed.timed_steps == 101 - 20 + 1  # iterations 20..101 of the one bar (258 long)
    assert parsed.harness_samples_per_s == pytest.approx(411.8648862314195)
    assert (parsed.iterations_run, parsed.max_steps) == (101, 100)


def test_the_harness_figure_is_global_batch_times_max_steps_over_its_train_time() -> None:
    """run_squad.py's training_sequences_per_second = batch × max_steps × GPUs / e2e_train_time: the log's
    own two numbers say so (this is why a run that stops before max_steps overstates its throughput)."""
    text = _log(V1_TWO)
    e2e = float(re.search(r"e2e_train_time : ([0-9.]+)", text).group(1))  # type: ignore[union-attr]
    parsed = parse_log("bert_base_squad", text, gpus=2)
    assert parsed.max_steps is not None
    assert parsed.harness_samples_per_s == pytest.approx(172 * 2 * parsed.max_steps / e2e, rel=1e-9)


def test_a_resnet_log_gives_the_step_its_own_timestamps_give() -> None:
    """ResNet-50's step is global batch / the per-iteration images/s; DLLogger also stamps each iteration's
    line, and the median gap between consecutive stamps is an independent measure of the same step."""
    text = _log(RESNET_TWO)
    parsed = parse_log("resnet50", text, gpus=2)
    assert parsed.per_gpu_batch == 640 and parsed.max_steps is None
    stamps = [
        datetime.strptime(s, "%Y-%m-%d %H:%M:%S.%f")
        for s in re.findall(r"DLL (\S+ \S+) - Epoch: 0 Iteration: \d+ ", text)
    ]
    gaps = [(b - a).total_seconds() for a, b in pairwise(stamps[19:])]
    assert parsed.step_s == pytest.approx(statistics.median(gaps), rel=0.01)
    assert parsed.harness_samples_per_s == pytest.approx(2029.27)


def test_a_log_without_steady_iterations_is_refused() -> None:
    head = "\n".join(_log(V1_TWO).replace("\r", "\n").splitlines()[:60])  # stops before iteration 20
    with pytest.raises(ConfigurationError, match="no tqdm rate") as caught:
        parse_log("bert_base_squad", head, gpus=2)
    assert "To fix:" in str(caught.value)
    with pytest.raises(ConfigurationError, match="no parser"):
        parse_log("ssd", head, gpus=2)


def test_the_shipped_extract_holds_the_fixture_logs_as_parsed() -> None:
    """Each fixture is byte for byte the log the extract cites (SHA-256), and the extract's figures are what
    the parser reads from it: the CSV is the logs, not a copy of someone's table."""
    by_path = {r.path: r for r in read_runs()}
    for path, gpus in FIXTURES.items():
        run = by_path[path]
        data = (LOGS / path).read_bytes()
        assert run.sha256 == hashlib.sha256(data).hexdigest() and run.commit == COMMIT
        parsed = parse_log(_model_dir(path), data.decode("utf-8", "replace"), gpus=gpus)
        assert run.gpus == gpus and run.per_gpu_batch == parsed.per_gpu_batch
        assert run.step_s == pytest.approx(parsed.step_s, rel=1e-5)
        assert run.harness_samples_per_s == pytest.approx(parsed.harness_samples_per_s, rel=1e-5)


def test_the_two_a100_series_scale_as_the_logs_say() -> None:
    """The same machine type in the same harness: 0.859 in the 2022 series, 0.987 in the 2021 one."""
    runs = [r for r in read_runs() if r.path in FIXTURES and r.model == "bert-base"]
    cases = {c.series: c for c in series_cases(runs, {r.row: 1.0 for r in runs})}
    assert cases["A100_80GB_SXM4_v1"].published_efficiency == pytest.approx(0.859, abs=0.001)
    assert cases["A100_80GB_SXM4"].published_efficiency == pytest.approx(0.987, abs=0.001)
    (spread,) = hardware_spreads(list(cases.values()))
    assert spread.spread_points == pytest.approx(12.8, abs=0.1)


def test_every_run_is_a_registered_fit_row_and_cites_one_commit() -> None:
    runs = read_runs()
    entry = shipped_registry().get(public_runs.SET_ID)
    assert entry.use is Use.FIT and sorted(r.row for r in runs) == sorted(entry.rows)
    assert {r.commit for r in runs} == {COMMIT} and COMMIT in (entry.source.commit or "")
    header = shipped_registry().read(public_runs.TABLE_COPY).split("\nrow,", 1)[0]
    assert COMMIT in header and "lambdal/deeplearning-benchmark" in header
    assert len({r.path for r in runs}) == len(runs)
    assert all(r.step_s > 0 and r.per_gpu_batch > 0 and r.timed_steps > 0 for r in runs)


def test_a_changed_extract_or_a_check_use_is_refused() -> None:
    """The runs fit η: a changed copy, or runs that a check set lists, never reach the fit."""

    def wrong_hash(doc: dict[str, Any]) -> None:
        doc["sets"][public_runs.SET_ID]["copy"]["sha256"] = "0" * 64

    with pytest.raises(ConfigurationError, match="is not the registry's"):
        read_runs(registry=registry_with(wrong_hash))

    def as_check(doc: dict[str, Any]) -> None:
        entry = doc["sets"][public_runs.SET_ID]
        entry["use"] = "check"
        del entry["constants"]

    with pytest.raises(ConfigurationError, match="not a fit set"):
        read_runs(registry=registry_with(as_check))


def _run(series: str, gpus: int, step_s: float, *, batch: int = 100, n: int = 0) -> LoggedRun:
    return LoggedRun(
        row=f"{gpus}x{series}/{batch}/{n}",
        series=series,
        system=f"{gpus}x{series}",
        gpu="A100-SXM4-80GB",
        gpus=gpus,
        model="bert-base",
        precision=Precision.TF32,
        harness_precision="FP32",
        per_gpu_batch=batch,
        step_s=step_s,
        timed_steps=80,
        harness_samples_per_s=math.nan,
        iterations_run=101,
        max_steps=100,
        interconnect="nvswitch" if gpus > 1 else "none",
        interconnect_gbps=2400 if gpus > 1 else 0,
        path=f"p/{series}/{gpus}/{batch}/{n}",
        commit=COMMIT,
        sha256="0" * 64,
    )


def test_runs_pair_within_one_series_and_batch_over_their_repeats() -> None:
    runs = [
        _run("a", 1, 1.0, n=0),
        _run("a", 1, 1.2, n=1),
        _run("a", 1, 5.0, n=2),  # the median of the three 1-GPU repeats is 1.2
        _run("a", 8, 1.5),
        _run("a", 8, 1.0, batch=50),  # no 1-GPU run at batch 50: left out
        _run("b", 8, 1.0),  # no 1-GPU run of series b: left out
        _run("c", 1, 1.0),
        _run("c", 8, 1.0),
    ]
    predicted = {r.row: 100.0 * r.gpus for r in runs} | {runs[3].row: 640.0}
    cases = series_cases(runs, predicted)
    assert [(c.series, c.gpus, c.per_gpu_batch) for c in cases] == [("a", 8, 100), ("c", 8, 100)]
    a, c = cases
    assert a.published_efficiency == pytest.approx(1.2 / 1.5) and (a.runs_one, a.runs_n) == (3, 1)
    assert a.predicted_efficiency == pytest.approx(640.0 / (8 * 100.0))
    assert a.difference_points == pytest.approx(100 * (0.8 - 0.8)) and a.within
    assert c.published_efficiency == pytest.approx(1.0) and c.predicted_efficiency == pytest.approx(1.0)
    (spread,) = hardware_spreads(cases)
    assert spread.gpus == 8 and [x.series for x in spread.cases] == ["a", "c"]
    assert spread.spread_points == pytest.approx(20.0)


def test_a_run_that_stopped_before_max_steps_is_flagged_and_recounted() -> None:
    short = replace(_run("a", 8, 1.0), iterations_run=70, harness_samples_per_s=1000.0)
    assert short.steps_short and short.harness_counted_samples_per_s == pytest.approx(700.0)
    full = _run("a", 8, 1.0)
    assert not full.steps_short


def test_the_extract_header_names_every_column() -> None:
    text = shipped_registry().read(public_runs.TABLE_COPY)
    columns = next(csv.reader([line for line in text.splitlines() if not line.startswith("#")][:1]))
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    for column in columns:
        if column not in {"row", "gpus", "model", "precision", "interconnect", "interconnect_gbps", "commit"}:
            assert column in header, column


def _case(link: str, published: float, predicted: float = 1.0) -> public_runs.SeriesCase:
    return public_runs.SeriesCase(
        series="s",
        gpu="g",
        model="bert-base",
        precision=Precision.TF32,
        harness_precision="FP32",
        interconnect=link,
        per_gpu_batch=32,
        gpus=8,
        runs_one=1,
        runs_n=1,
        published_efficiency=published,
        predicted_efficiency=predicted,
    )


def test_eta_is_the_median_ratio_per_link_or_over_every_pair_where_a_link_has_few() -> None:
    many = [_case("nvswitch", 0.99 - 0.01 * i, 0.99) for i in range(9)]
    few = [_case("pcie", 0.5)]
    eta = public_runs.link_efficiencies([*many, *few, _case("nvswitch", 1.2)])
    # NVSwitch: its 10 pairs' median ratio; PCIe (1 pair) and NVLink (none): the median over all 11.
    ratios = sorted([c.published_efficiency / c.predicted_efficiency for c in many] + [1.2 / 1.0])
    assert eta["nvswitch"] == statistics.median(ratios)
    pooled = statistics.median([*ratios, 0.5])
    assert eta["pcie"] == eta["nvlink"] == pooled
    assert set(eta) == set(public_runs.LINK_CLASSES)


def test_eta_never_exceeds_one_and_needs_a_pair() -> None:
    assert public_runs.link_efficiencies([_case("pcie", 1.1)] * 8)["pcie"] == 1.0
    with pytest.raises(ConfigurationError, match="no N-GPU run pairs"):
        public_runs.link_efficiencies([])
