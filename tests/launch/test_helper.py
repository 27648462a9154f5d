"""The training-script helper: per-rank batches, the sampler's coverage, and weighted losses that make
DDP's gradient over uneven batches the gradient of the whole global batch (real torchrun, gloo)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from srift.launch.helper import HelperError, PlanBatchSampler, RankShare
from srift.launch.layout import apportion

HERE = Path(__file__).parent


def _plan(*groups: tuple[int, int]) -> dict[str, Any]:
    """A plan of CPU VMs: (count, per-VM batch) per group, one rank per VM."""
    choices = [
        {
            "instance_type": f"tb.t{k}",
            "market": "on_demand",
            "count": n,
            "batch": b,
            "gpus": 1,
            "instance_gpus": 0,
        }
        for k, (n, b) in enumerate(groups)
    ]
    return {
        "id": 3,
        "choices": choices,
        "global_batch": sum(n * b for n, b in groups),
        "iterations": 10,
        "request": {"provider": "testbed", "network": {"library": "gloo"}},
    }


def test_each_rank_gets_its_plan_batch_and_a_weight_of_w_b_over_b() -> None:
    plan = _plan((1, 96), (4, 40))
    shares = [RankShare.of(plan, rank=r) for r in range(5)]
    assert [s.local_batch for s in shares] == [96, 40, 40, 40, 40]
    assert [s.offset for s in shares] == [0, 96, 136, 176, 216]
    assert shares[0].loss_weight() == pytest.approx(5 * 96 / 256)
    assert sum(s.loss_weight() for s in shares) == pytest.approx(5.0)
    with pytest.raises(HelperError, match="ranks"):
        RankShare.of(plan, rank=0, world_size=4)


def test_from_env_checks_the_rank_lies_on_its_node(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_plan((2, 8), (1, 4))))
    env = {"SRIFT_PLAN": str(path), "RANK": "2", "WORLD_SIZE": "3", "SRIFT_NODE_RANK": "2"}
    assert RankShare.from_env(env=env).local_batch == 4
    standalone = {k: v for k, v in env.items() if k != "SRIFT_NODE_RANK"}  # torchrun --standalone sets none
    assert RankShare.from_env(env=standalone).local_batch == 4
    with pytest.raises(HelperError, match="node-rank"):
        RankShare.from_env(env={**env, "SRIFT_NODE_RANK": "0"})
    with pytest.raises(HelperError, match="SRIFT_URL"):
        RankShare.from_env(env={"SRIFT_PLAN": "12", "RANK": "0"})


@pytest.mark.parametrize("dataset_size", [2560, 2571, 300, 7])
def test_the_sampler_covers_every_sample_once_in_the_plans_proportions(dataset_size: int) -> None:
    batches = (96, 96, 40, 40, 40, 40)
    samplers = [PlanBatchSampler(dataset_size, batches, r, seed=5) for r in range(len(batches))]
    steps = [list(s) for s in samplers]
    assert len({len(s) for s in steps}) == 1
    seen = [i for rank_steps in steps for batch in rank_steps for i in batch]
    assert sorted(seen) == list(range(dataset_size))
    for step in range(len(samplers[0])):
        counts = tuple(len(steps[r][step]) for r in range(len(batches)))
        size = samplers[0].global_size(step)
        assert sum(counts) == size
        assert counts == (batches if size == sum(batches) else apportion(size, batches))
    samplers[0].set_epoch(1)
    assert next(iter(samplers[0])) != steps[0][0]


def test_drop_last_keeps_only_whole_global_batches() -> None:
    s = PlanBatchSampler(2571, (96, 40), 1, drop_last=True)
    assert len(s) == 2571 // 136
    assert all(len(b) == 40 for b in s)


def _single_process_gradient(global_batch: int) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(global_batch, 6, generator=generator)
    y = torch.randn(global_batch, 2, generator=generator)
    torch.nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


@pytest.fixture(scope="module")
def emitted_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two VMs with 2 and 1 ranks (per-rank batches 5, 5, 2), launched by their emitted torchrun lines
    (static rendezvous on 127.0.0.1), one DDP step unweighted (`plain`) then one weighted: rank 0's
    report, `grads` by mode. One launch serves both tests below: a torchrun launch and its ranks' torch
    imports cost seconds, a step milliseconds."""
    import socket

    from srift.launch.emit import EmitFormat, LaunchOptions, emit

    def gpu_choice(name: str, batch: int, gpus: int) -> dict[str, Any]:
        return {
            "instance_type": name,
            "market": "on_demand",
            "count": 1,
            "batch": batch,
            "gpus": gpus,
            "instance_gpus": gpus,
        }

    tmp_path = tmp_path_factory.mktemp("emitted")
    plan = {**_plan(), "choices": [gpu_choice("g.two", 10, 2), gpu_choice("g.one", 2, 1)], "global_batch": 12}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "grads.json"
    # plain first: the weighted step after it must not see its gradients (the worker zeroes them)
    options = LaunchOptions(
        script=str(HERE / "ddp_grad_worker.py"),
        script_args=(str(plan_file), "plain,weighted", str(out)),
        plan_ref=str(plan_file),
        master_addr="127.0.0.1",
        master_port=port,
    )
    [emitted] = emit(plan, EmitFormat.TORCHRUN, options)
    procs = []
    for cmd in emitted.content:
        env = {
            **os.environ,
            **{s.name: s.value for s in cmd.env},
            "SRIFT_BACKEND": "gloo",
            "OMP_NUM_THREADS": "1",
        }
        argv = [sys.executable, "-m", "torch.distributed.run", *cmd.argv[1:]]
        procs.append(
            subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        )
    outputs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    result: dict[str, Any] = json.loads(out.read_text())
    result["global_batch"] = plan["global_batch"]
    return result


@pytest.mark.slow
def test_weighted_ddp_gradient_over_uneven_batches_is_the_global_batch_gradient(
    emitted_run: dict[str, Any],
) -> None:
    expected = _single_process_gradient(emitted_run["global_batch"])
    found = {mode: [torch.tensor(g) for g in grads] for mode, grads in emitted_run["grads"].items()}
    weighted, plain = found["weighted"], found["plain"]
    for got, want in zip(weighted, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    gap = max(float((got - want).abs().max()) for got, want in zip(plain, expected, strict=True))
    assert gap > 1e-3, "without the weights DDP's average is not the global batch's gradient"


@pytest.mark.slow
def test_the_emitted_torchrun_lines_give_every_rank_its_plan_batch_across_uneven_nodes(
    emitted_run: dict[str, Any],
) -> None:
    """torchrun numbers ranks by node rank, as the plan's layout does (the helper checks each rank lies on
    its node), and the weighted DDP gradient is the global batch's."""
    assert emitted_run["global_batch"] == 12
    assert tuple(emitted_run["rank_batches"]) == (5, 5, 2)
    got = [torch.tensor(g) for g in emitted_run["grads"]["weighted"]]
    for g, want in zip(got, _single_process_gradient(12), strict=True):
        torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-6)


def test_the_helper_imports_no_server_side_package() -> None:
    code = (
        "import sys, srift.launch.helper; "
        "banned = ('sqlalchemy', 'fastapi', 'pydantic', 'yaml', 'srift.db'); "
        "print(sorted(m for m in banned if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"


def test_a_plan_id_is_fetched_from_the_server(tmp_path: Path) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    plan = _plan((1, 4), (1, 2))
    seen: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append((self.path, self.headers.get("Authorization", "")))
            body = json.dumps(plan).encode() if self.path == "/v1/plans/3" else b"{}"
            self.send_response(200 if self.path == "/v1/plans/3" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        share = RankShare.from_env(env={"SRIFT_PLAN": "3", "SRIFT_URL": url, "SRIFT_TOKEN": "r", "RANK": "1"})
        assert share.local_batch == 2 and seen == [("/v1/plans/3", "Bearer r")]
        with pytest.raises(HelperError, match="404"):
            RankShare.from_env(env={"SRIFT_PLAN": "4", "SRIFT_URL": url, "RANK": "0"})
    finally:
        server.shutdown()
        server.server_close()
