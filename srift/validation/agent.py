"""A per-host worker that runs probes/ddp_train.py again and again without paying torch's import each time.

Started inside a testbed host (`python -m srift.validation.agent PROBE [MODULE ...]`), it imports torch,
torch.distributed, the profiler and the given modules (the model factories' modules) once, then reads one
JSON request per line on stdin — {"id", "argv", "env", "entry"} — and answers one JSON line on stdout: {"id",
"rc", "error", "wall_s"}. Each request runs in a forked child: the child sets the request's environment
variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...), calls the entry's `main(argv)` — the probe's by
default ("ddp"), srift.validation.timing's ("timing": a further timing pass over a profile's points) or
probes/overlap.py's ("overlap": compute and allreduce timed alone and together) —
(its output goes to stderr; results are written with `--out`) and leaves with `os._exit`, as a fresh
process would, but without importing
torch again (on a quarter-core quota that import takes about 7 s of wall time, paid by every one of the
validation's dozens of runs otherwise). The child keeps the run's objects alive and leaves with `os._exit`,
skipping torch's DDP teardown, which sometimes deadlocks on the GIL (see `_keep_locals`).

The parent never touches torch beyond importing it (no threads, no process group), so forking is safe.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

READY = "srift-agent-ready"
PRELOAD = ("torch", "torch.distributed", "torch.nn.parallel", "torch.optim", "srift.profiling.profiler")
"""Imported once by the parent (none of them starts a thread); further modules come as arguments."""


def warm_up() -> None:
    """Pay torch's one-time lazy imports (the first optimizer pulls in torch._dynamo: seconds of CPU)."""
    import torch

    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)


def load_probe(path: str) -> ModuleType:
    """Import probes/ddp_train.py (a script, not a package module) from its path."""
    spec = importlib.util.spec_from_file_location("srift_ddp_train_probe", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"error: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_kept: list[dict[str, Any]] = []


def _keep_locals(probe_main: Any) -> Any:
    """A profile hook that keeps the locals of `probe_main` alive after it returns.

    When main returns, its DistributedDataParallel object dies, and the Reducer's destructor joins gloo's
    worker thread while holding the GIL; if that thread is just then releasing a finished collective's
    Python-owned tensors it needs the GIL too, and both wait forever (seen on about one run in ten with four
    ranks). The child leaves with os._exit, so nothing needs to be destroyed at all.
    """
    code = probe_main.__code__

    def hook(frame: Any, event: str, _arg: Any) -> None:
        if event == "return" and frame.f_code is code:
            _kept.append(dict(frame.f_locals))

    return hook


def _entries(probe: ModuleType) -> dict[str, Callable[[list[str]], int]]:
    from srift.validation import timing

    def overlap(argv: list[str]) -> int:
        """probes/overlap.py, beside the DDP probe."""
        found = load_probe(str(Path(str(probe.__file__)).with_name("overlap.py")))
        return int(found.main(argv) or 0)

    return {"ddp": probe.main, "timing": timing.main, "overlap": overlap}


def _child(probe: ModuleType, request: dict[str, Any]) -> int:
    """Run the request's entry (the probe by default) in the forked child; returns its exit code."""
    os.environ.update({str(k): str(v) for k, v in dict(request.get("env") or {}).items()})
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    entries = _entries(probe)
    name = str(request.get("entry") or "ddp")
    if name not in entries:
        print(f"unknown entry {name!r}; known: {', '.join(entries)}", file=sys.stderr)
        return 2
    sys.setprofile(_keep_locals(probe.main))
    try:
        return int(entries[name]([str(a) for a in request.get("argv", [])]) or 0)
    except SystemExit as exc:
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc(file=sys.stderr)
        return 1


def handle(probe: ModuleType, request: dict[str, Any]) -> dict[str, Any]:
    """Run one request in a forked child and wait for it; never raises."""
    start = time.perf_counter()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = _child(probe, request)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    error = "" if rc == 0 else f"{request.get('entry') or 'ddp'} exited with {rc} (see the agent log)"
    return {"id": request.get("id"), "rc": rc, "error": error, "wall_s": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    probe_path = args[0] if args else str(Path(__file__).resolve().parents[2] / "probes" / "ddp_train.py")
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    for name in PRELOAD + tuple(args[1:]):
        importlib.import_module(name)
    warm_up()
    probe = load_probe(probe_path)
    _entries(probe)
    out = sys.stdout
    out.write(READY + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError:
            out.write(json.dumps({"id": None, "rc": 2, "error": f"not JSON: {line[:200]!r}"}) + "\n")
            out.flush()
            continue
        if request.get("stop"):
            break
        out.write(json.dumps(handle(probe, request)) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
