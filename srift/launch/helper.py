"""For the user's training script: the plan's per-rank batches, a sampler, loss weights and a step reporter.

With per-VM batches that differ, DistributedDataParallel still averages gradients equally over ranks, so a
rank with 40 samples weighs as much as one with 96 and the update is not the global batch's gradient.
`RankShare.scale` multiplies rank r's mean loss by W·b_r/B (W ranks, b_r its samples, B the global batch):
DDP's average (1/W)·Σ_r W·b_r/B·∇mean_r = (1/B)·Σ over all B samples of ∇loss — the gradient of the whole
global batch, as one process would compute it on the concatenated batch.

    from srift.launch.helper import RankShare, IterationReporter
    share = RankShare.from_env()                 # SRIFT_PLAN (a plan file or id) and torchrun's RANK
    sampler = share.sampler(len(dataset), seed=0)
    loader = DataLoader(dataset, batch_sampler=sampler)
    reporter = IterationReporter.from_env(share)  # rank 0 with SRIFT_URL, SRIFT_RUN_ID, SRIFT_RUN_TOKEN
    for step, idx in enumerate(sampler):
        loss = share.scale(loss_fn(model(x[idx]), y[idx]), local_samples=len(idx),
                           global_samples=sampler.global_size(step))
        loss.backward(); opt.step(); opt.zero_grad()
        reporter.tick(step)
    reporter.close()

Depends on torch, httpx and the standard library only (and srift.launch.layout, which is standard library).
"""

from __future__ import annotations

import json
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Sampler

from srift.launch.layout import Layout, apportion, layout_of


class HelperError(RuntimeError):
    """The helper cannot do what was asked; the message says why and how to fix it."""


def load_plan(
    ref: str | os.PathLike[str] | int | Mapping[str, Any],
    *,
    url: str | None = None,
    token: str | None = None,
    timeout_s: float = 30.0,
) -> dict[str, Any]:
    """A plan document: given as a mapping, read from a JSON file, or fetched by id from a Srift server."""
    if isinstance(ref, Mapping):
        return dict(ref)
    text = str(ref)
    path = Path(text)
    if path.is_file():
        loaded = json.loads(path.read_text())
        if not isinstance(loaded, dict):
            raise HelperError(f"{path} holds no plan document. To fix: save `srift plan --json` output")
        return loaded
    if not text.isdigit():
        raise HelperError(f"plan {text!r} is neither a file nor a plan id. To fix: set SRIFT_PLAN")
    if not url:
        raise HelperError(f"plan id {text} needs a server. To fix: set SRIFT_URL (or give a plan file)")
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(f"{url.rstrip('/')}/v1/plans/{text}", headers=headers, timeout=timeout_s)
    if response.status_code != 200:
        raise HelperError(f"GET /v1/plans/{text} answered {response.status_code}: {response.text[:200]}")
    document: dict[str, Any] = response.json()
    return document


@dataclass(frozen=True, slots=True)
class RankShare:
    """One rank's part of the plan: its rank, its batch, every rank's batch and the global batch."""

    rank: int
    world_size: int
    rank_batches: tuple[int, ...]
    layout: Layout

    @classmethod
    def of(cls, plan: Mapping[str, Any], *, rank: int, world_size: int | None = None) -> RankShare:
        layout = layout_of(plan)
        batches = layout.rank_batches()
        if world_size is not None and world_size != len(batches):
            raise HelperError(
                f"the plan has {len(batches)} ranks, the job {world_size}. To fix: launch the plan's "
                "commands (`srift plan --emit torchrun`) unchanged"
            )
        if not 0 <= rank < len(batches):
            raise HelperError(f"rank {rank} is outside the plan's {len(batches)} ranks")
        return cls(rank=rank, world_size=len(batches), rank_batches=batches, layout=layout)

    @classmethod
    def from_env(
        cls, plan: str | int | Mapping[str, Any] | None = None, *, env: Mapping[str, str] | None = None
    ) -> RankShare:
        """From SRIFT_PLAN (or `plan`), torchrun's RANK and WORLD_SIZE, and SRIFT_URL (with SRIFT_TOKEN, a
        read token, when the server asks for one) to fetch a plan by id. When SRIFT_NODE_RANK is set,
        checks that RANK lies on that node."""
        environ = os.environ if env is None else env
        ref = plan if plan is not None else environ.get("SRIFT_PLAN")
        if ref is None:
            raise HelperError("no plan. To fix: set SRIFT_PLAN to a plan file or id (the emitted files do)")
        document = load_plan(ref, url=environ.get("SRIFT_URL"), token=environ.get("SRIFT_TOKEN"))
        rank = int(environ.get("RANK", "0"))
        world = int(environ["WORLD_SIZE"]) if "WORLD_SIZE" in environ else None
        share = cls.of(document, rank=rank, world_size=world)
        node = environ.get("SRIFT_NODE_RANK")
        if node is not None:
            first = share.layout.first_rank_of_node(int(node))
            procs = share.layout.part_of_node(int(node)).procs_per_node
            if not first <= rank < first + procs:
                raise HelperError(
                    f"rank {rank} runs on node {node}, whose ranks are {first}–{first + procs - 1} in the "
                    "plan. To fix: give each VM the --node-rank of its emitted line"
                )
        return share

    @property
    def local_batch(self) -> int:
        return self.rank_batches[self.rank]

    @property
    def global_batch(self) -> int:
        return sum(self.rank_batches)

    @property
    def offset(self) -> int:
        """Where this rank's samples start inside a global batch."""
        return sum(self.rank_batches[: self.rank])

    def loss_weight(self, *, local_samples: int | None = None, global_samples: int | None = None) -> float:
        """W·b/B: what this rank's mean loss is multiplied by so that DDP's average is the global batch's
        gradient (b and B default to the plan's; give them for a short last batch)."""
        b = self.local_batch if local_samples is None else local_samples
        big_b = self.global_batch if global_samples is None else global_samples
        if big_b <= 0:
            raise HelperError("a global batch of no samples has no gradient")
        return self.world_size * b / big_b

    def scale(
        self, loss: torch.Tensor, *, local_samples: int | None = None, global_samples: int | None = None
    ) -> torch.Tensor:
        """`loss` (this rank's mean over its samples) weighted by `loss_weight`."""
        return loss * self.loss_weight(local_samples=local_samples, global_samples=global_samples)

    def sampler(
        self, dataset_size: int, *, seed: int = 0, shuffle: bool = True, drop_last: bool = False
    ) -> PlanBatchSampler:
        return PlanBatchSampler(
            dataset_size, self.rank_batches, self.rank, seed=seed, shuffle=shuffle, drop_last=drop_last
        )


class PlanBatchSampler(Sampler[list[int]]):
    """This rank's sample indices of each global batch, in the plan's proportions.

    Every rank draws the same permutation of the dataset per epoch (seeded by `seed` + epoch), cuts it into
    global batches and takes its own slice, so over an epoch the ranks cover every sample exactly once. A
    short last global batch (unless `drop_last`) is split in the plan's proportions by largest remainders.
    """

    def __init__(
        self,
        dataset_size: int,
        rank_batches: Sequence[int],
        rank: int,
        *,
        seed: int = 0,
        shuffle: bool = True,
        drop_last: bool = False,
    ) -> None:
        if dataset_size < 0:
            raise HelperError(f"dataset size {dataset_size} is negative")
        self.dataset_size = dataset_size
        self.rank_batches = tuple(rank_batches)
        self.rank = rank
        self.seed = seed
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.epoch = 0
        self.global_batch = sum(self.rank_batches)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        whole, rest = divmod(self.dataset_size, self.global_batch)
        return whole + (1 if rest and not self.drop_last else 0)

    def global_size(self, step: int) -> int:
        """Samples in global batch `step` of the epoch."""
        return min(self.global_batch, self.dataset_size - step * self.global_batch)

    def counts(self, step: int) -> tuple[int, ...]:
        """Every rank's samples in global batch `step`."""
        size = self.global_size(step)
        return self.rank_batches if size == self.global_batch else apportion(size, self.rank_batches)

    def __iter__(self) -> Iterator[list[int]]:
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.dataset_size, generator=generator).tolist()
        else:
            order = list(range(self.dataset_size))
        for step in range(len(self)):
            counts = self.counts(step)
            start = step * self.global_batch + sum(counts[: self.rank])
            yield order[start : start + counts[self.rank]]


class IterationReporter:
    """Sends measured iteration times to the training run from a background thread.

    `tick(step)` records the wall time since the previous tick as step's iteration time and returns at once:
    it only appends to an in-memory queue, never waits for the network, and never raises. The thread posts
    batches to POST /v1/jobs/{run}/iterations with the run's token; when the server cannot be reached it
    keeps the reports (at most `max_pending`, dropping the oldest) and retries with backoff. The server
    counts a step once, so a batch that is sent twice (a lost answer) is harmless. `clock` times the
    steps (injectable for tests); the thread's own waits use the monotonic clock.
    """

    def __init__(
        self,
        *,
        url: str,
        run_id: int,
        token: str,
        plan_id: int | None = None,
        batch_steps: int = 50,
        flush_every_s: float = 5.0,
        max_pending: int = 100_000,
        timeout_s: float = 10.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.url = url.rstrip("/")
        self.run_id = run_id
        self.token = token
        self.plan_id = plan_id
        self.batch_steps = batch_steps
        self.flush_every_s = flush_every_s
        self.max_pending = max_pending
        self.timeout_s = timeout_s
        self.clock = clock
        self.sent = 0
        self.dropped = 0
        self.failures = 0
        self.last_error: str | None = None
        self._queue: queue.SimpleQueue[tuple[int, float, float]] = queue.SimpleQueue()
        self._last_tick: float | None = None
        self._started: float | None = None
        self._stop = threading.Event()
        self._close_by = math.inf
        self._final_sent = threading.Event()
        self._thread = threading.Thread(target=self._run, name="srift-reporter", daemon=True)
        self._thread.start()

    @classmethod
    def from_env(
        cls, share: RankShare | None = None, *, env: Mapping[str, str] | None = None
    ) -> IterationReporter | NullReporter:
        """A reporter on rank 0 when SRIFT_URL, SRIFT_RUN_ID and SRIFT_RUN_TOKEN are set; else one that
        does nothing (the other ranks, or a run nobody tracks)."""
        environ = os.environ if env is None else env
        rank = share.rank if share is not None else int(environ.get("RANK", "0"))
        needed = ("SRIFT_URL", "SRIFT_RUN_ID", "SRIFT_RUN_TOKEN")
        if rank != 0 or any(not environ.get(k) for k in needed):
            return NullReporter()
        plan_id = share.layout.plan_id if share is not None else None
        return cls(
            url=environ["SRIFT_URL"],
            run_id=int(environ["SRIFT_RUN_ID"]),
            token=environ["SRIFT_RUN_TOKEN"],
            plan_id=plan_id,
        )

    def tick(self, step: int) -> None:
        """Mark the end of `step`: its iteration time is the time since the previous tick (the first tick
        only starts the clock)."""
        now = self.clock()
        if self._last_tick is None:
            self._started = now
        else:
            self.record(step, now - self._last_tick, elapsed_s=now - (self._started or now))
        self._last_tick = now

    def record(self, step: int, iteration_s: float, *, elapsed_s: float = 0.0) -> None:
        """Queue one step's measured iteration time (non-blocking)."""
        if step >= 0 and iteration_s > 0 and math.isfinite(iteration_s):
            self._queue.put((step, iteration_s, elapsed_s))

    def close(self, timeout_s: float = 10.0) -> bool:
        """Send what is queued (marked final) within `timeout_s`; True when it all reached the server."""
        self._close_by = time.monotonic() + timeout_s
        self._stop.set()
        self._thread.join(timeout_s + self.timeout_s)
        return self._final_sent.is_set()

    def _post(self, steps: list[tuple[int, float, float]], *, final: bool) -> bool:
        import httpx

        body = {
            "plan_id": self.plan_id,
            "steps": [{"step": s, "iteration_s": t} for s, t, _ in steps],
            "elapsed_s": max((e for _, _, e in steps), default=None),
            "final": final,
        }
        try:
            response = httpx.post(
                f"{self.url}/v1/jobs/{self.run_id}/iterations",
                json=body,
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=self.timeout_s,
            )
        except httpx.HTTPError as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            return False
        if response.status_code >= 500 or response.status_code == 429:
            self.last_error = f"HTTP {response.status_code}"
            return False
        if response.status_code >= 400:
            # A report the server refuses (a finished run, a bad token) will not pass on retry: drop it.
            self.last_error = f"HTTP {response.status_code}: {response.text[:200]}"
            self.dropped += len(steps)
            return True
        self.sent += len(steps)
        return True

    def _run(self) -> None:
        pending: list[tuple[int, float, float]] = []
        backoff_s = 0.0
        while True:
            stopping = self._stop.is_set()
            deadline = time.monotonic() + (0 if stopping else self.flush_every_s)
            while len(pending) < self.batch_steps:
                wait_s = max(0.0, deadline - time.monotonic())
                try:
                    item = self._queue.get(timeout=wait_s) if wait_s > 0 else self._queue.get_nowait()
                    pending.append(item)
                except queue.Empty:
                    break
            if len(pending) > self.max_pending:
                self.dropped += len(pending) - self.max_pending
                pending = pending[-self.max_pending :]
            if pending or stopping:
                batch = pending[: self.batch_steps]
                final = stopping and len(pending) <= self.batch_steps and self._queue.empty()
                if self._post(batch, final=final):
                    pending = pending[len(batch) :]
                    backoff_s = 0.0
                    if final:
                        self._final_sent.set()
                        return
                else:
                    self.failures += 1
                    backoff_s = min(30.0, max(0.5, 2 * backoff_s))
                    if stopping:
                        left_s = self._close_by - time.monotonic()
                        if left_s <= 0:
                            self.dropped += len(pending) + self._queue.qsize()
                            return
                        time.sleep(min(backoff_s, left_s))
                    else:
                        self._stop.wait(backoff_s)
            elif stopping:
                return


class NullReporter:
    """A reporter that reports nothing (ranks other than 0, or an untracked run)."""

    sent = 0
    dropped = 0
    failures = 0

    def tick(self, step: int) -> None:
        del step

    def record(self, step: int, iteration_s: float, *, elapsed_s: float = 0.0) -> None:
        del step, iteration_s, elapsed_s

    def close(self, timeout_s: float = 10.0) -> bool:
        del timeout_s
        return True


def init_distributed(*, env: Mapping[str, str] | None = None) -> str:
    """Initialise torch.distributed from torchrun's environment with the plan's backend (SRIFT_BACKEND,
    which the emitted files set: nccl, or gloo for CPU ranks); returns the backend."""
    import torch.distributed as dist

    environ = os.environ if env is None else env
    backend = environ.get("SRIFT_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    return backend
