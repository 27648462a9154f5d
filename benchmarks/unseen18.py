"""An eighteenth unseen set for issue #17's honesty protocol: protocol run 18.

Written on 2026-11-26 (shell clock), on commit 3a6123b (round 14: validation profiles and times each
type's host alone, one after another), while a development check of that commit ran on the burned
unseen17 set, and before its result was read. Nothing from the check went into this set. The seventeen
earlier sets are no longer unseen; these three are new and were never profiled, simulated or validated
before their protocol run (only their parameter counts, one forward+backward on this machine's full core,
and that every parameter gets a gradient, so that DDP accepts them on several hosts, were checked). They
differ from the shipped models (cnn, wide_mlp, transformer), the development models
(benchmarks/devmodels.py) and all earlier sets in layer types and gradient sizes:

`cellrnn`: a sequence regressor stepping an `nn.GRUCell` of 256 units by hand over 24 steps of 64
features, a head giving a mean and (through `nn.Softplus`) a variance per step, `nn.GaussianNLLLoss`;
about 1.0 MB of gradients. `twotower`: a retrieval model with a 24,000-user `nn.Embedding` of 128
dimensions and an item tower of `nn.Linear` with `nn.LogSigmoid`, scored by `nn.CosineSimilarity`
against a positive and a negative item, `nn.MarginRankingLoss`; about 12.4 MB. `voxdec`: a voxel
decoder, a latent through three `nn.ConvTranspose3d` of kernel 4 (1³ → 2³ → 4³ → 8³ voxels, 288 channels
then 64) with `nn.BatchNorm3d` and `nn.RReLU`, a `nn.Conv3d` to one channel and `nn.BCEWithLogitsLoss`
against an occupancy grid; about 47 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen18:cellrnn --input benchmarks.unseen18:cellrnn_input \\
        --model benchmarks.unseen18:twotower --input benchmarks.unseen18:twotower_input \\
        --model benchmarks.unseen18:voxdec --input benchmarks.unseen18:voxdec_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(1801)

CELL_FEATURES = 64
CELL_UNITS = 256
CELL_STEPS = 24
USERS = 24_000
ITEM_FEATURES = 96
TOWER_DIM = 128
VOX_LATENT = 128
VOX_CHANNELS = 288
VOX_OUT_CHANNELS = 64
VOX_SIDE = 8


class _CellRnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(CELL_FEATURES, CELL_UNITS)
        self.head = nn.Linear(CELL_UNITS, 2)
        self.positive = nn.Softplus()
        self.loss = nn.GaussianNLLLoss()

    def forward(self, sequence: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        state = sequence.new_zeros(sequence.shape[0], CELL_UNITS)
        outputs = []
        for step in range(sequence.shape[1]):
            state = self.cell(sequence[:, step], state)
            outputs.append(self.head(state))
        out = torch.stack(outputs, dim=1)
        loss: torch.Tensor = self.loss(out[..., 0], target, self.positive(out[..., 1]) + 1e-3)
        return loss


def cellrnn() -> nn.Module:
    return _CellRnn()


def cellrnn_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    sequence = torch.randn(batch, CELL_STEPS, CELL_FEATURES, generator=_inputs)
    return sequence, torch.randn(batch, CELL_STEPS, generator=_inputs)


class _TwoTower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.users = nn.Embedding(USERS, TOWER_DIM)
        self.items = nn.Sequential(nn.Linear(ITEM_FEATURES, 256), nn.LogSigmoid(), nn.Linear(256, TOWER_DIM))
        self.similarity = nn.CosineSimilarity(dim=1)
        self.loss = nn.MarginRankingLoss(margin=0.2)

    def forward(self, users: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        user = self.users(users)
        good = self.similarity(user, self.items(positive))
        bad = self.similarity(user, self.items(negative))
        out: torch.Tensor = self.loss(good, bad, torch.ones_like(good))
        return out


def twotower() -> nn.Module:
    return _TwoTower()


def twotower_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    users = torch.randint(0, USERS, (batch,), generator=_inputs)
    positive = torch.randn(batch, ITEM_FEATURES, generator=_inputs)
    return users, positive, torch.randn(batch, ITEM_FEATURES, generator=_inputs)


class _VoxDec(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lift = nn.Linear(VOX_LATENT, VOX_CHANNELS)
        self.body = nn.Sequential(
            nn.ConvTranspose3d(VOX_CHANNELS, VOX_CHANNELS, 4, stride=2, padding=1),
            nn.BatchNorm3d(VOX_CHANNELS),
            nn.RReLU(),
            nn.ConvTranspose3d(VOX_CHANNELS, VOX_CHANNELS, 4, stride=2, padding=1),
            nn.BatchNorm3d(VOX_CHANNELS),
            nn.RReLU(),
            nn.ConvTranspose3d(VOX_CHANNELS, VOX_OUT_CHANNELS, 4, stride=2, padding=1),
            nn.BatchNorm3d(VOX_OUT_CHANNELS),
            nn.RReLU(),
            nn.Conv3d(VOX_OUT_CHANNELS, 1, 3, padding=1),
        )
        self.loss = nn.BCEWithLogitsLoss()

    def forward(self, latent: torch.Tensor, occupancy: torch.Tensor) -> torch.Tensor:
        x = self.lift(latent).view(-1, VOX_CHANNELS, 1, 1, 1)
        out: torch.Tensor = self.loss(self.body(x), occupancy)
        return out


def voxdec() -> nn.Module:
    return _VoxDec()


def voxdec_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    latent = torch.randn(batch, VOX_LATENT, generator=_inputs)
    shape = (batch, 1, VOX_SIDE, VOX_SIDE, VOX_SIDE)
    return latent, (torch.rand(shape, generator=_inputs) > 0.7).float()
