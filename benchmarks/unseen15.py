"""A fifteenth unseen set for issue #17's honesty protocol: a second sample of round 11's code.

Written on 2026-11-25 (shell clock), on commit 75ce7ef, after protocol run 14 (round 11's first run) and
with no change to the model, the validation or the optimizer since (docs/validation.md, round 11): run 15
measures the same code again on new models, so that the next round knows how often that code meets the
targets, not only that it did or did not once. The fourteen earlier sets are no longer unseen; these three
are new and were never profiled, simulated or validated before their protocol run (only their parameter
counts, one forward+backward on this machine's full core, and that every parameter gets a gradient, so
that DDP accepts them on several hosts, were checked). They differ from the shipped models (cnn,
wide_mlp, transformer), the development models (benchmarks/devmodels.py) and all earlier sets in layer
types and gradient sizes:

`lpnet`: a 3×32×32 image classifier with power-average pooling (`nn.LPPool2d`, p = 2), `nn.ZeroPad2d`,
`nn.Tanhshrink` between plain 3×3 convolutions, 10 classes, multi-margin loss), about 2.7 MB of
gradients; `tagvec`: a multi-label text classifier (a 24,000-word `nn.Embedding` of 200
dimensions, a 1-D convolution with `nn.Softsign`, `nn.MaxPool1d` over time, 50 labels, multi-label soft
margin loss; 48 tokens), about 20 MB; `crossnet`: a deep cross network (DCN-v2) over 1,536 dense features
(four full-rank cross layers x₀ ⊙ (W·x + b) + x, then a small tower, Poisson negative log-likelihood),
about 39 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen15:lpnet --input benchmarks.unseen15:lpnet_input \\
        --model benchmarks.unseen15:tagvec --input benchmarks.unseen15:tagvec_input \\
        --model benchmarks.unseen15:crossnet --input benchmarks.unseen15:crossnet_input
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(1501)

IMAGE = 32
CLASSES = 10
LP_CHANNELS = (3, 48, 96, 192)
VOCAB = 24_000
TAG_DIM = 200
TAG_TOKENS = 48
TAG_FILTERS = 256
LABELS = 50
CROSS_FEATURES = 1536
CROSS_LAYERS = 4
TOWER = 256


class _LpNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        stages: list[nn.Module] = []
        for c_in, c_out in itertools.pairwise(LP_CHANNELS):
            stages += [
                nn.ZeroPad2d(1),
                nn.Conv2d(c_in, c_out, 3),
                nn.Tanhshrink(),
                nn.Conv2d(c_out, c_out, 3, padding=1),
                nn.Tanhshrink(),
                nn.LPPool2d(2, 2),
            ]
        self.features = nn.Sequential(*stages)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(LP_CHANNELS[-1] * 4 * 4, CLASSES))
        self.loss = nn.MultiMarginLoss()

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.loss(self.head(self.features(images)), labels)
        return out


def lpnet() -> nn.Module:
    return _LpNet()


def lpnet_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.randn(batch, 3, IMAGE, IMAGE, generator=_inputs)
    return images, torch.randint(0, CLASSES, (batch,), generator=_inputs)


class _TagVec(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, TAG_DIM)
        self.conv = nn.Conv1d(TAG_DIM, TAG_FILTERS, 5, padding=2)
        self.act = nn.Softsign()
        self.pool = nn.MaxPool1d(TAG_TOKENS)
        self.head = nn.Linear(TAG_FILTERS, LABELS)
        self.loss = nn.MultiLabelSoftMarginLoss()

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        pooled = self.pool(self.act(self.conv(self.embed(tokens).transpose(1, 2)))).squeeze(2)
        out: torch.Tensor = self.loss(self.head(pooled), labels)
        return out


def tagvec() -> nn.Module:
    return _TagVec()


def tagvec_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(0, VOCAB, (batch, TAG_TOKENS), generator=_inputs)
    return tokens, (torch.rand(batch, LABELS, generator=_inputs) < 0.1).float()


class _Cross(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(CROSS_FEATURES, CROSS_FEATURES)

    def forward(self, x0: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = x0 * self.linear(x) + x
        return out


class _CrossNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.crosses = nn.ModuleList(_Cross() for _ in range(CROSS_LAYERS))
        self.tower = nn.Sequential(nn.Linear(CROSS_FEATURES, TOWER), nn.ReLU(), nn.Linear(TOWER, 1))
        self.loss = nn.PoissonNLLLoss()

    def forward(self, features: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        x = features
        for cross in self.crosses:
            x = cross(features, x)
        out: torch.Tensor = self.loss(self.tower(x).squeeze(1), counts)
        return out


def crossnet() -> nn.Module:
    return _CrossNet()


def crossnet_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    features = 0.1 * torch.randn(batch, CROSS_FEATURES, generator=_inputs)
    return features, torch.poisson(torch.full((batch,), 2.0), generator=_inputs)
