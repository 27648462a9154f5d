"""Real DDP training across testbed hosts: one agent per host runs probes/ddp_train.py for each case.

`AgentPool` keeps one `srift.validation.agent` process per host that has been used (started on first use,
in the host's namespace and cgroup). `run_case` gives rank r of a case to the r-th host named, with its own
per-rank batch, a fresh rendezvous port on rank 0's address, and returns rank 0's result: the mean and the
per-iteration times of `iters` timed iterations after `warmup` untimed ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from srift.errors import EnvironmentProblem
from srift.profiling.curves import CurveSamples
from srift.settings import REPO_ROOT
from srift.testbed import Testbed
from srift.validation.agent import READY

AGENT_START_S = 180.0
BASE_PORT = 29_700
PORT_SPAN = 2_000


def ddp_probe_path() -> Path:
    path = REPO_ROOT / "probes" / "ddp_train.py"
    if not path.is_file():
        raise EnvironmentProblem(
            f"{path} is missing", hint="run validation from a source checkout of srift (it ships probes/)"
        )
    return path


@dataclass(frozen=True, slots=True)
class TimingJob:
    """One timing pass: `model` and `input_factory` (MODULE:FACTORY) timed at `batches` on `host`."""

    host: str
    model: str
    input_factory: str
    batches: tuple[int, ...]
    repeats: int
    warmup: int
    loss: str | None = None


@dataclass(frozen=True, slots=True)
class Colocation:
    """A run's compute-only rounds (probes/ddp_train.py `--colocation-rounds`): every rank's forward plus
    backward seconds with all ranks computing at once (`together_s[rank][round]`) and, for the solo ranks,
    alone in the same round (`alone_s[rank][round]`, None for the others), on `clock`: "cpu" (the process's
    CPU seconds, on a CPU host) or "wall" (with CUDA). Each step started `idle_s` after its barrier. The
    same steps on `other_clock`, where recorded (`other_together_s`, `other_alone_s`): diagnostics."""

    together_s: tuple[tuple[float, ...], ...]
    alone_s: tuple[tuple[float, ...] | None, ...]
    clock: str = "wall"
    idle_s: float = 0.0
    other_clock: str | None = None
    other_together_s: tuple[tuple[float, ...], ...] | None = None
    other_alone_s: tuple[tuple[float, ...] | None, ...] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Colocation:
        def table(rows: Any) -> tuple[tuple[float, ...] | None, ...]:
            return tuple(None if ts is None else tuple(float(t) for t in ts) for ts in rows)

        other = next((c for c in ("cpu", "wall") if data.get(f"together_{c}_s") is not None), None)
        return cls(
            together_s=tuple(tuple(float(t) for t in ts) for ts in data["together_s"]),
            alone_s=table(data["alone_s"]),
            clock=str(data.get("clock", "wall")),
            idle_s=float(data.get("idle_s", 0.0)),
            other_clock=other,
            other_together_s=(
                tuple(tuple(float(t) for t in ts) for ts in data[f"together_{other}_s"]) if other else None
            ),
            other_alone_s=table(data[f"alone_{other}_s"]) if other else None,
        )

    def to_dict(self) -> dict[str, Any]:
        def rows(table: tuple[tuple[float, ...] | None, ...]) -> list[list[float] | None]:
            return [None if ts is None else list(ts) for ts in table]

        out: dict[str, Any] = {
            "together_s": rows(self.together_s),
            "alone_s": rows(self.alone_s),
            "clock": self.clock,
            "idle_s": self.idle_s,
        }
        if self.other_clock and self.other_together_s is not None and self.other_alone_s is not None:
            out[f"together_{self.other_clock}_s"] = rows(self.other_together_s)
            out[f"alone_{self.other_clock}_s"] = rows(self.other_alone_s)
        return out

    def on_clock(self, clock: str) -> Colocation | None:
        """The same rounds judged by `clock` ("cpu" or "wall"); None where the run did not record it."""
        if clock == self.clock:
            return self
        if clock != self.other_clock or self.other_together_s is None or self.other_alone_s is None:
            return None
        return Colocation(self.other_together_s, self.other_alone_s, clock=clock, idle_s=self.idle_s)


@dataclass(frozen=True, slots=True)
class DdpResult:
    """Rank 0's measurement of one run."""

    mean_iter_s: float
    median_iter_s: float
    stdev_iter_s: float
    iter_times_s: tuple[float, ...]
    wall_s: float
    colocation: Colocation | None = None
    peak_bytes: tuple[int, ...] = ()
    """Each rank's peak memory in use over what it used before building the model (probes/ddp_train.py)."""


class _Agent:
    def __init__(self, testbed: Testbed, host: str, log: IO[str], preload: Sequence[str]) -> None:
        self.host = host
        self.proc: subprocess.Popen[str] = testbed.popen_in(
            host,
            [sys.executable, "-m", "srift.validation.agent", str(ddp_probe_path()), *preload],
            env={"PYTHONUNBUFFERED": "1"},
            cwd=str(REPO_ROOT),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def read(self, deadline: float) -> str:
        try:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(self.host) from None
        if line is None:
            raise EnvironmentProblem(
                f"the validation agent on {self.host} exited (code {self.proc.poll()})",
                hint="see the agent log in the validation work folder",
            )
        return line

    def send(self, request: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=3)
                return
            except subprocess.TimeoutExpired:
                continue


class AgentPool:
    """One agent per used host; `close()` stops them all (use as a context manager)."""

    def __init__(self, testbed: Testbed, *, workdir: Path, preload: Sequence[str] = ()) -> None:
        self.testbed = testbed
        self.preload = tuple(preload)
        self.workdir = workdir
        self.agents: dict[str, _Agent] = {}
        self._logs: list[IO[str]] = []
        self._cases = 0

    def __enter__(self) -> AgentPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ensure(self, hosts: Sequence[str]) -> None:
        """Start (and wait for) agents on `hosts` that have none running."""
        started = []
        for host in hosts:
            agent = self.agents.get(host)
            if agent is not None and agent.alive():
                continue
            if agent is not None:
                agent.kill()
            log = open(self.workdir / f"agent-{host}.log", "a")  # noqa: SIM115 - closed in close()
            self._logs.append(log)
            self.agents[host] = _Agent(self.testbed, host, log, self.preload)
            started.append(host)
        deadline = time.monotonic() + AGENT_START_S
        for host in started:
            agent = self.agents[host]
            try:
                while agent.read(deadline).strip() != READY:
                    pass
            except TimeoutError:
                agent.kill()
                raise EnvironmentProblem(
                    f"the validation agent on {host} did not start within {AGENT_START_S:.0f} s",
                    hint="the machine may be overloaded; see the agent log in the validation work folder",
                ) from None

    def run_case(
        self,
        hosts: Sequence[str],
        batches: Sequence[int],
        *,
        model: str,
        input_factory: str,
        iters: int,
        warmup: int,
        timeout_s: float,
        bucket_cap_mb: float | None = None,
        loss: str | None = None,
        trace: Path | None = None,
        time_budget_s: float | None = None,
        min_iters: int = 2,
        colocation_rounds: int = 0,
        solo_ranks: Sequence[int] = (0,),
        colocation_budget_s: float | None = None,
        colocation_idle_s: float = 0.0,
        strategy: str = "ddp",
    ) -> DdpResult:
        """Train on `hosts` (rank order) with per-rank `batches`; kills and raises on failure or timeout.

        `loss` (MODULE:FUNCTION) is the loss the ranks backpropagate (ddp_train.py's own by default);
        with `time_budget_s` the run times about that many seconds of iterations (between `min_iters` and
        `iters`, from the last warm-up iteration's time);
        `trace` makes every rank write its timeline to `<trace>.rank<r>.json` (diagnostics);
        `colocation_rounds` adds up to that many compute-only rounds after the timed iterations (as many
        as fit `colocation_budget_s` seconds of together-steps, when given), `solo_ranks` timed alone in
        each, every step `colocation_idle_s` after its barrier (the result's `colocation`)."""
        if len(hosts) != len(batches) or not hosts:
            raise ValueError("one batch per host, at least one host")
        self.ensure(hosts)
        out = self._out_file("ddp-")
        argv = [
            "--model", model, "--input", input_factory,
            "--batches", ",".join(str(b) for b in batches),
            "--iters", str(iters), "--warmup", str(warmup), "--threads", "1",
            "--out", str(out),
        ]  # fmt: skip
        if bucket_cap_mb is not None:
            argv += ["--bucket-cap-mb", f"{bucket_cap_mb:g}"]
        if strategy != "ddp":
            argv += ["--strategy", strategy]
        else:
            argv += ["--memory-steps", "0"]
        if loss is not None:
            argv += ["--loss", loss]
        if time_budget_s is not None:
            argv += ["--time-budget-s", f"{time_budget_s:g}", "--min-iters", str(min_iters)]
        if trace is not None:
            argv += ["--trace", str(trace)]
        if colocation_rounds > 0 and len(hosts) > 1:
            argv += ["--colocation-rounds", str(colocation_rounds)]
            argv += ["--solo-ranks", ",".join(str(r) for r in solo_ranks)]
            if colocation_budget_s is not None:
                argv += ["--colocation-budget-s", f"{colocation_budget_s:g}"]
            if colocation_idle_s > 0:
                argv += ["--colocation-idle-s", f"{colocation_idle_s:g}"]
        envs = self._process_group(hosts)
        requests = [
            (host, {"id": self._cases, "argv": argv, "env": env})
            for host, env in zip(hosts, envs, strict=True)
        ]
        answers, (data,) = self._run_and_read(requests, [out], timeout_s=timeout_s, what="DDP run")
        times = tuple(float(t) for t in data["iter_times_s"])
        return DdpResult(
            mean_iter_s=float(data["mean_iter_s"]),
            median_iter_s=float(data["median_iter_s"]),
            stdev_iter_s=float(data["stdev_iter_s"]),
            iter_times_s=times,
            wall_s=max(float(a.get("wall_s", 0.0)) for a in answers),
            colocation=Colocation.from_dict(data["colocation"]) if "colocation" in data else None,
            peak_bytes=tuple(int(b) for b in data.get("peak_bytes", ())),
        )

    def overlap(
        self, groups: Sequence[Sequence[str]], *, argv: Sequence[str], timeout_s: float
    ) -> list[dict[str, Any]]:
        """probes/overlap.py on each group of hosts (one process group per group, all groups at once);
        rank 0's JSON result per group."""
        hosts = [h for g in groups for h in g]
        if len(set(hosts)) != len(hosts) or any(len(g) < 2 for g in groups):
            raise ValueError("two or more hosts per group, each host in one group")
        self.ensure(hosts)
        outs: list[Path] = []
        requests = []
        for group in groups:
            out = self._out_file("overlap-")
            outs.append(out)
            for rank, (host, env) in enumerate(zip(group, self._process_group(group), strict=True)):
                out_arg = ["--out", str(out)] if rank == 0 else []
                request = {"id": self._cases, "entry": "overlap", "argv": [*argv, *out_arg], "env": env}
                requests.append((host, request))
        return self._run_and_read(requests, outs, timeout_s=timeout_s, what="overlap probe")[1]

    def time_points(self, jobs: Sequence[TimingJob], *, timeout_s: float) -> list[CurveSamples]:
        """Run each job's timing pass (srift.validation.timing) on its host at once; one result per job."""
        hosts = [j.host for j in jobs]
        if len(set(hosts)) != len(hosts):
            raise ValueError("one timing job per host")
        self.ensure(hosts)
        outs: list[Path] = []
        requests = []
        for job in jobs:
            out = self._out_file("timing-")
            outs.append(out)
            argv = [
                "--model", job.model, "--input", job.input_factory,
                "--batches", ",".join(str(b) for b in job.batches),
                "--repeats", str(job.repeats), "--warmup", str(job.warmup), "--threads", "1",
                "--out", str(out),
            ]  # fmt: skip
            if job.loss:
                argv += ["--loss", job.loss]
            self._cases += 1
            requests.append((job.host, {"id": self._cases, "entry": "timing", "argv": argv, "env": {}}))
        _, results = self._run_and_read(requests, outs, timeout_s=timeout_s, what="timing pass")
        return [CurveSamples.from_dict(r) for r in results]

    def _out_file(self, prefix: str) -> Path:
        """A fresh, empty file in the work folder for one process group's rank 0 to write its JSON result to
        (`--out`); `_run_and_read` reads it back and removes it."""
        fd, name = tempfile.mkstemp(prefix=prefix, suffix=".json", dir=self.workdir)
        os.close(fd)
        return Path(name)

    def _process_group(self, hosts: Sequence[str]) -> list[dict[str, str]]:
        """A new case with one torch.distributed process group over `hosts` (rank order, one rank per host):
        each rank's environment, rendezvous on a fresh port at the first host's address."""
        self._cases += 1
        port = BASE_PORT + self._cases % PORT_SPAN
        master = self.testbed.host(hosts[0]).address
        return [
            {
                "RANK": str(rank),
                "LOCAL_RANK": "0",
                "WORLD_SIZE": str(len(hosts)),
                "LOCAL_WORLD_SIZE": "1",
                "MASTER_ADDR": master,
                "MASTER_PORT": str(port),
            }
            for rank in range(len(hosts))
        ]

    def _run_and_read(
        self,
        requests: Sequence[tuple[str, dict[str, Any]]],
        outs: Sequence[Path],
        *,
        timeout_s: float,
        what: str,
    ) -> tuple[list[dict[str, Any]], list[Any]]:
        """`_dispatch` the requests, then read back the JSON each of `outs` holds; the files are removed
        whatever happens. The agents' answers and the results, in order."""
        try:
            answers = self._dispatch(requests, timeout_s=timeout_s, what=what)
            return answers, [json.loads(out.read_text()) for out in outs]
        finally:
            for out in outs:
                out.unlink(missing_ok=True)

    def _dispatch(
        self, requests: Sequence[tuple[str, dict[str, Any]]], *, timeout_s: float, what: str
    ) -> list[dict[str, Any]]:
        """Send each request to its host's agent and wait for all answers (in order); on a timeout or a
        failed answer, kill those agents (they restart on next use) and raise EnvironmentProblem."""
        hosts = [host for host, _ in requests]
        for host, request in requests:
            self.agents[host].send(request)
        deadline = time.monotonic() + timeout_s
        answers: list[dict[str, Any]] = []
        try:
            for host in hosts:
                answers.append(json.loads(self.agents[host].read(deadline)))
        except TimeoutError:
            for host in hosts:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.agents[host].proc.pid, signal.SIGUSR1)
            time.sleep(1.0)
            for host in hosts:
                self.agents[host].kill()
            raise EnvironmentProblem(
                f"{what} on {', '.join(hosts)} did not finish within {timeout_s:.0f} s",
                hint="the machine may be overloaded, or a rank failed; see the agent logs",
            ) from None
        failed = [(h, a) for h, a in zip(hosts, answers, strict=True) if a.get("rc")]
        if failed:
            for host in hosts:
                self.agents[host].kill()
            detail = "; ".join(f"{h}: rc {a.get('rc')} {a.get('error', '')[-300:]}" for h, a in failed)
            raise EnvironmentProblem(f"{what} failed ({detail})", hint="see the agent logs")
        return answers

    def close(self) -> None:
        for agent in self.agents.values():
            if agent.alive():
                with contextlib.suppress(OSError, BrokenPipeError):
                    agent.send({"stop": True})
                    assert agent.proc.stdin is not None
                    agent.proc.stdin.close()
        for agent in self.agents.values():
            try:
                agent.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                agent.kill()
        for log in self._logs:
            log.close()
        self.agents.clear()
        self._logs.clear()
