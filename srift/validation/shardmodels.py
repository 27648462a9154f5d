"""The sharded cases' model: residual MLP blocks in an nn.ModuleList, 57.5 MB of fp32 parameters.

Large enough that sharding its parameters and gradients shows in a rank's memory and its all-gathers and
reduce-scatters dominate the testbed's links, small enough that a step at batch 32 takes a fraction of a
second on one core: an input projection 256 → 768, six pre-norm blocks (LayerNorm, 768 → 1536, GELU,
1536 → 768, residual) and a 10-way head: 14,383,882 parameters (the issue asks for one model above 50 MB;
the testbed's 200–800 Mbit/s links move a full-sharding step's 86 MB per rank pair in 1–4 s). The FSDP
units are the six blocks and the root (srift.domain.sharding, blocks policy), as `probes/ddp_train.py
--strategy` wraps them.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

BLOCKS_IN = 256
BLOCKS_DIM = 768
BLOCKS_COUNT = 6
BLOCKS_CLASSES = 10

_inputs = torch.Generator().manual_seed(0)


class MlpBlock(nn.Module):
    """x + fc2(gelu(fc1(norm(x))))."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = x + self.fc2(F.gelu(self.fc1(self.norm(x))))
        return out


class BlocksNet(nn.Module):
    """Input projection, `count` MlpBlocks, head."""

    def __init__(self, *, dim: int = BLOCKS_DIM, count: int = BLOCKS_COUNT) -> None:
        super().__init__()
        self.embed = nn.Linear(BLOCKS_IN, dim)
        self.blocks = nn.ModuleList(MlpBlock(dim) for _ in range(count))
        self.head = nn.Linear(dim, BLOCKS_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        out: torch.Tensor = self.head(x)
        return out


def blocks() -> nn.Module:
    torch.manual_seed(6)
    return BlocksNet()


def blocks_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, BLOCKS_IN, generator=_inputs)
