"""Measure a user's input pipeline: samples per second per CPU core, and bytes read per sample.

`srift profile --loader MODULE:FACTORY` calls the factory for the user's DataLoader (or any iterable of
batches), draws batches for a few seconds, and divides the samples delivered by the CPU seconds spent
delivering them, in this process and in the loader's worker processes (Linux /proc/<pid>/stat user and system
time, read while they run). That is what one core of this machine's CPU does for this pipeline; the simulator
multiplies it by the vCPUs a VM leaves to its loader (srift/sim/data.py). Bytes per sample are what the
loader's workers (or, without workers, this process) read through read() (Linux /proc/<pid>/io `rchar`) during
the first epoch it sees, page-cache hits included, so a dataset read from a cold cloud bucket reads at least
this much. A measurement longer than an epoch starts the next one (new workers included).
"""

from __future__ import annotations

import gc
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from srift.domain import InputPipeline
from srift.errors import InvalidInput

DEFAULT_SECONDS = 5.0
WARMUP_BATCHES = 2


@dataclass(frozen=True, slots=True)
class LoaderMeasurement:
    """What the measurement saw: samples, CPU and wall seconds, bytes read, and the derived rates."""

    samples: int
    batches: int
    cpu_s: float
    wall_s: float
    bytes_read: int
    workers: int

    @property
    def samples_per_s_per_core(self) -> float:
        return self.samples / self.cpu_s if self.cpu_s > 0 else math.inf

    @property
    def bytes_per_sample(self) -> float:
        return self.bytes_read / self.samples if self.samples else 0.0

    def pipeline(self, *, bytes_per_sample: float | None = None) -> InputPipeline:
        """The profile's input pipeline (bytes per sample as measured unless given)."""
        size = self.bytes_per_sample if bytes_per_sample is None else bytes_per_sample
        return InputPipeline(
            samples_per_s_per_core=self.samples_per_s_per_core,
            bytes_per_sample=size,
            source=(
                f"measured: {self.samples} samples in {self.batches} batches, {self.cpu_s:.2f} CPU s "
                f"({self.workers} worker process(es)), {self.wall_s:.2f} s wall"
            ),
        )


def batch_size(batch: Any) -> int:
    """Samples in one batch: the leading dimension of its first tensor (or array, or list)."""
    item = batch
    while True:
        if hasattr(item, "shape") and len(getattr(item, "shape", ())) > 0:
            return int(item.shape[0])
        if isinstance(item, dict) and item:
            item = next(iter(item.values()))
            continue
        if isinstance(item, list | tuple) and item:
            head = item[0]
            if hasattr(head, "shape") or isinstance(head, dict | list | tuple):
                item = head
                continue
            return len(item)
        raise InvalidInput(
            f"cannot tell how many samples a batch of type {type(batch).__name__} holds",
            hint="yield tensors (or tuples/dicts of tensors) whose first dimension is the batch",
            field="loader",
        )


def _ticks(pid: int) -> int | None:
    """User + system clock ticks of a live process (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[11]) + int(fields[12])


class _Workers:
    """CPU ticks and bytes read of the loader's worker processes (children that were not there before the
    loader was made), sampled while they live."""

    def __init__(self, parent: int, *, ignore: set[int]) -> None:
        self.parent = parent
        self.ignore = ignore
        self.first: dict[int, tuple[int, int]] = {}
        self.last: dict[int, tuple[int, int]] = {}
        self.started = False

    def sample(self) -> None:
        for pid in _children(self.parent):
            if pid in self.ignore:
                continue
            ticks = _ticks(pid)
            if ticks is None:
                continue
            now = (ticks, _rchar(pid))
            if pid not in self.first:
                self.first[pid] = now if not self.started else (0, 0)
            self.last[pid] = now

    def start(self) -> None:
        self.sample()
        self.started = True

    def cpu_s(self) -> float:
        tick = os.sysconf("SC_CLK_TCK")
        return sum(self.last[p][0] - self.first[p][0] for p in self.last) / tick

    def bytes_read(self) -> int:
        return sum(self.last[p][1] - self.first[p][1] for p in self.last)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    task_dir = Path(f"/proc/{pid}/task")
    if not task_dir.is_dir():
        return out
    for task in task_dir.iterdir():
        try:
            text = (task / "children").read_text()
        except OSError:
            continue
        out.extend(int(x) for x in text.split())
    return out


def _rchar(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _bytes(me: int, read0: int, workers: _Workers) -> int:
    """Bytes the data reads took: the workers' when there are workers (the main process then only reads
    batches back from them), else this process's."""
    return workers.bytes_read() if workers.last else _rchar(me) - read0


def measure_loader(
    factory: Callable[[], Iterable[Any]], *, seconds: float = DEFAULT_SECONDS, max_batches: int | None = None
) -> LoaderMeasurement:
    """Draw batches from `factory()` for about `seconds` (after two warm-up batches) and measure them."""
    if not (math.isfinite(seconds) and seconds > 0):
        raise InvalidInput(f"{seconds} is not > 0", hint="measure for a few seconds", field="loader_seconds")
    me = os.getpid()
    others = set(_children(me))
    try:
        loader = factory()
        iterator = iter(loader)
    except Exception as exc:
        raise InvalidInput(
            f"the loader factory failed: {type(exc).__name__}: {exc}",
            hint="the factory must return a DataLoader (or any iterable of batches)",
            field="loader",
        ) from exc
    try:
        for _ in range(WARMUP_BATCHES):
            next(iterator)
    except StopIteration as exc:
        raise InvalidInput(
            "the loader yields fewer than three batches",
            hint="give a loader over enough data to measure (a few hundred samples at least)",
            field="loader",
        ) from exc
    workers = _Workers(me, ignore=others)
    workers.start()
    read0 = _rchar(me)
    cpu0 = time.process_time()
    start = time.perf_counter()
    samples = batches = 0
    first_epoch: tuple[int, int] | None = None
    while True:
        try:
            batch = next(iterator)
        except StopIteration:
            if first_epoch is None:
                first_epoch = (_bytes(me, read0, workers), samples)
            iterator = iter(loader)
            continue
        samples += batch_size(batch)
        batches += 1
        workers.sample()
        if time.perf_counter() - start >= seconds or (max_batches is not None and batches >= max_batches):
            break
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu0 + workers.cpu_s()
    read, read_samples = first_epoch or (_bytes(me, read0, workers), samples)
    if samples == 0:
        raise InvalidInput(
            "the loader yielded no batch after the warm-up",
            hint="give a loader over enough data to measure",
            field="loader",
        )
    del iterator, loader
    gc.collect()
    per_sample = max(read, 0) / read_samples if read_samples else 0.0
    return LoaderMeasurement(samples, batches, cpu, wall, round(per_sample * samples), len(workers.last))
