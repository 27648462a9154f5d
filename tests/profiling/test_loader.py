"""Measuring a user's input pipeline: samples/s per CPU core and bytes read per sample (real DataLoaders)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from srift.cli import main
from srift.domain.profile_document import read_profile
from srift.errors import InvalidInput
from srift.profiling.loader import batch_size, measure_loader
from srift.profiling.testmodels import cnn_loader, encoded_images

TM = "srift.profiling.testmodels"
QUICK = ["--max-batch", "4", "--repeats", "1", "--warmup", "0", "--iterations", "2", "--threads", "1"]


def mean_file_bytes(count: int = 2048) -> float:
    files = list(encoded_images(count).glob("*.z"))
    return sum(f.stat().st_size for f in files) / len(files)


def test_a_single_process_loader_reads_its_files_and_is_timed_on_cpu_seconds() -> None:
    # A child process that is not the loader's (a server, another tool) is not taken for a worker.
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        m = measure_loader(cnn_loader, seconds=0.5)
    finally:
        other.communicate(b"")
    assert m.workers == 0 and m.samples > 0 and m.cpu_s > 0
    # Every sample reads its compressed file once (plus a few bytes of /proc reads by the measurement).
    assert m.bytes_per_sample == pytest.approx(mean_file_bytes(), rel=0.05)
    assert m.samples_per_s_per_core == pytest.approx(m.samples / m.cpu_s)
    pipe = m.pipeline()
    assert pipe.source.startswith("measured:") and pipe.bytes_per_sample == m.bytes_per_sample
    assert m.pipeline(bytes_per_sample=1e6).bytes_per_sample == 1e6


def test_worker_processes_are_counted_by_their_cpu_time_and_reads() -> None:
    m = measure_loader(lambda: cnn_loader(workers=2), seconds=1.0)
    assert m.workers >= 2
    # Workers read ahead of what is delivered (prefetch), so allow some more than one file per sample.
    assert mean_file_bytes() * 0.9 <= m.bytes_per_sample <= mean_file_bytes() * 1.3
    assert 0 < m.samples_per_s_per_core < float("inf")


def test_batch_size_follows_the_first_tensor() -> None:
    t = torch.zeros(7, 3)
    assert batch_size(t) == 7
    assert batch_size((t, torch.zeros(7))) == 7
    assert batch_size({"x": t, "y": 1}) == 7
    assert batch_size([1, 2, 3]) == 3
    with pytest.raises(InvalidInput) as info:
        batch_size(object())
    assert info.value.field == "loader"


def test_a_loader_too_short_to_measure_is_refused() -> None:
    with pytest.raises(InvalidInput) as info:
        measure_loader(lambda: [torch.zeros(2, 1)], seconds=0.1)
    assert "fewer than three batches" in info.value.detail


def test_srift_profile_loader_writes_the_input_pipeline_into_the_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "cnn.json"
    argv = ["profile", f"{TM}:cnn", "--input", f"{TM}:cnn_input", "--out", str(out_file), *QUICK]
    argv += ["--loader", f"{TM}:cnn_loader", "--loader-seconds", "0.3", "--accelerator", "T4"]
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    assert done.value.code == 0, err
    profile = read_profile(json.loads(out_file.read_text()))
    assert profile.input_pipeline is not None
    assert profile.input_pipeline.samples_per_s_per_core > 0
    assert profile.input_pipeline.bytes_per_sample == pytest.approx(mean_file_bytes(), rel=0.05)
    assert "input pipeline" in out and "samples/s per CPU core" in out
    with pytest.raises(SystemExit) as done:
        main([*argv, "--bytes-per-sample", "500000"])
    capsys.readouterr()
    assert read_profile(json.loads(out_file.read_text())).input_pipeline.bytes_per_sample == 500000
