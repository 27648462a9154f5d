"""One rank of a real DDP step with the plan's uneven batches (run by torchrun from test_helper.py).

Every rank takes its slice of the same global batch (srift.launch.helper.RankShare), computes its mean loss,
weighted by the helper (`weighted`) or not (`plain`), and runs backward through DistributedDataParallel;
rank 0 saves the averaged gradient to OUT. MODES is one mode or several, comma-separated (`weighted,plain`):
one launch then runs one DDP step per mode from the same initial weights (a torchrun launch and its ranks'
torch imports cost seconds; a step costs milliseconds), and OUT maps each mode to its gradient.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from srift.launch.helper import RankShare, init_distributed


def main() -> None:
    plan_file, modes, out = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
    init_distributed()
    share = RankShare.from_env(plan_file)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    ddp = DistributedDataParallel(model)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(share.global_batch, 6, generator=generator, dtype=torch.float32)
    y = torch.randn(share.global_batch, 2, generator=generator, dtype=torch.float32)
    mine = slice(share.offset, share.offset + share.local_batch)
    grads = {}
    for mode in modes:
        model.zero_grad(set_to_none=True)  # no optimizer step: every mode starts from the same weights
        loss = torch.nn.functional.mse_loss(ddp(x[mine]), y[mine])
        if mode == "weighted":
            loss = share.scale(loss)
        loss.backward()
        grads[mode] = [p.grad.tolist() for p in model.parameters()]
    if share.rank == 0:
        with open(out, "w") as f:
            json.dump({"grads": grads, "rank_batches": share.rank_batches}, f)
    dist.barrier()


if __name__ == "__main__":
    # As probes/ddp_train.py does: torch's gloo threads can abort the interpreter's teardown after a
    # distributed run ("terminate called without an active exception"), so a finished rank leaves at once.
    main()
    sys.stdout.flush()
    os._exit(0)
