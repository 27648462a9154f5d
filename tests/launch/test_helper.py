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


def _ddp_gradient(tmp_path: Path, plan: dict[str, Any], mode: str) -> list[torch.Tensor]:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    out = tmp_path / f"{mode}.json"
    world = sum(c["count"] for c in plan["choices"])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}"]
    cmd += [str(HERE / "ddp_grad_worker.py"), str(plan_file), mode, str(out)]
    done = subprocess.run(cmd, timeout=240, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return [torch.tensor(g) for g in json.loads(out.read_text())["grads"]]


def _single_process_gradient(global_batch: int) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(global_batch, 6, generator=generator)
    y = torch.randn(global_batch, 2, generator=generator)
    torch.nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


@pytest.mark.slow
def test_weighted_ddp_gradient_over_uneven_batches_is_the_global_batch_gradient(tmp_path: Path) -> None:
    plan = _plan((1, 9), (2, 2))
    expected = _single_process_gradient(plan["global_batch"])
    weighted = _ddp_gradient(tmp_path, plan, "weighted")
    plain = _ddp_gradient(tmp_path, plan, "plain")
    for got, want in zip(weighted, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    gap = max(float((got - want).abs().max()) for got, want in zip(plain, expected, strict=True))
    assert gap > 1e-3, "without the weights DDP's average is not the global batch's gradient"
