"""A twenty-second unseen set for issue #17's honesty protocol: protocol run 22.

Written on 2026-11-26 (shell clock) after round 18's change landed (main e7de5d3: validation runs fill
their time budget, up to 500 timed iterations in quick, so a short step is timed over about 2 s instead of
at most 30 iterations; the simulator is round 15's) and before any run of these models. The twenty-one
earlier sets are no longer unseen; these three are new and were never profiled, simulated or validated
before their protocol run (only their parameter counts, one forward+backward on this machine's full core,
and that every parameter gets a gradient, so that DDP accepts them on several hosts, were checked). They
differ from the shipped models (cnn, wide_mlp, transformer), the development models
(benchmarks/devmodels.py) and all earlier sets in layer types and gradient sizes:

`denoise`: a one-dimensional signal denoiser: `nn.CircularPad1d` before a strided `nn.Conv1d`, four blocks
of a circularly padded depthwise `nn.Conv1d` and a pointwise one with `nn.Hardswish`, a `nn.ConvTranspose1d`
back to the input's length, scored by `nn.L1Loss` against the clean signal; about 0.8 MB of gradients.
`setpair`: a deep-sets matcher of two bags of items: a 36,000-item `nn.Embedding` of 80 dimensions, a
per-item `nn.Linear` with `nn.GELU`, max pooling over the bag, `nn.LayerNorm`, and
`nn.HingeEmbeddingLoss` on the pair's `nn.PairwiseDistance`; about 11.6 MB. `wideae`: a tabular
autoencoder of four `nn.Linear` layers (2048 → 2560 → 256 → 2560 → 2048) under
`torch.nn.utils.parametrizations.weight_norm`, with `nn.Softsign`, scored by `nn.MSELoss`; about
47 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen22:denoise --input benchmarks.unseen22:denoise_input \\
        --model benchmarks.unseen22:setpair --input benchmarks.unseen22:setpair_input \\
        --model benchmarks.unseen22:wideae --input benchmarks.unseen22:wideae_input
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

_inputs = torch.Generator().manual_seed(2201)

SIGNAL = 128
CHANNELS = 192
BLOCKS = 4
ITEMS = 36_000
ITEM_DIM = 80
BAG = 20
FEATURES = 2048
WIDE = 2560
CODE = 256


class _Denoise(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.CircularPad1d(3), nn.Conv1d(1, CHANNELS, 8, stride=2), nn.Hardswish()]
        for _ in range(BLOCKS):
            layers += [
                nn.CircularPad1d(4),
                nn.Conv1d(CHANNELS, CHANNELS, 9, groups=CHANNELS),
                nn.Conv1d(CHANNELS, CHANNELS, 1),
                nn.Hardswish(),
            ]
        layers += [
            nn.ConvTranspose1d(CHANNELS, 64, 4, stride=2, padding=1),
            nn.Hardswish(),
            nn.Conv1d(64, 1, 1),
        ]
        self.body = nn.Sequential(*layers)
        self.loss = nn.L1Loss()

    def forward(self, noisy: torch.Tensor, clean: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.loss(self.body(noisy), clean)
        return out


def denoise() -> nn.Module:
    return _Denoise()


def denoise_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    phase = torch.rand(batch, 1, 1, generator=_inputs) * 6.283
    clean = torch.sin(torch.linspace(0.0, 25.0, SIGNAL).view(1, 1, SIGNAL) + phase)
    return clean + 0.3 * torch.randn(batch, 1, SIGNAL, generator=_inputs), clean


class _SetPair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.items = nn.Embedding(ITEMS, ITEM_DIM)
        self.each = nn.Sequential(nn.Linear(ITEM_DIM, 192), nn.GELU())
        self.norm = nn.LayerNorm(192)
        self.distance = nn.PairwiseDistance()
        self.loss = nn.HingeEmbeddingLoss(margin=2.0)

    def encode(self, bag: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.norm(self.each(self.items(bag)).amax(dim=1))
        return out

    def forward(self, left: torch.Tensor, right: torch.Tensor, same: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.loss(self.distance(self.encode(left), self.encode(right)), same)
        return out


def setpair() -> nn.Module:
    return _SetPair()


def setpair_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    left = torch.randint(0, ITEMS, (batch, BAG), generator=_inputs)
    right = torch.randint(0, ITEMS, (batch, BAG), generator=_inputs)
    same = torch.where(torch.rand(batch, generator=_inputs) < 0.5, 1.0, -1.0)
    return left, right, same


class _WideAe(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            weight_norm(nn.Linear(FEATURES, WIDE)),
            nn.Softsign(),
            weight_norm(nn.Linear(WIDE, CODE)),
            nn.Softsign(),
            weight_norm(nn.Linear(CODE, WIDE)),
            nn.Softsign(),
            weight_norm(nn.Linear(WIDE, FEATURES)),
        )
        self.loss = nn.MSELoss()

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.loss(self.body(rows), rows)
        return out


def wideae() -> nn.Module:
    return _WideAe()


def wideae_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, FEATURES, generator=_inputs)
