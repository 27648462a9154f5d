"""A twelfth unseen set for issue #17's honesty protocol, written by the lead after round 9's last change.

Written on 2026-11-25 at about 01:55 UTC (shell clock), on commit a8a6f27 (round 9 as run 11 tested it,
with the co-location rounds judged on the CPU clock again; docs/validation.md, round 9). The eleven earlier
sets are no longer unseen; these three are new and were never profiled, simulated or validated before their
protocol run (only their parameter counts, one forward+backward on this machine's full core, and that every
parameter gets a gradient, so that DDP accepts them on several hosts, were checked). They differ from the
shipped models (cnn, wide_mlp, transformer), the development models (benchmarks/devmodels.py) and all
earlier sets in layer types and gradient sizes:

`mobile`: a MobileNetV2-style classifier over 3×32×32 images (inverted residual blocks: 1×1 expansion,
3×3 depthwise convolution, squeeze-and-excitation with Hardsigmoid, 1×1 projection; `nn.BatchNorm2d` and
ReLU6; 10 classes, cross-entropy), about 0.7 MB of gradients; `tabular`: a tabular transformer (16
categorical columns of 2,000 values each embedded in 64 dimensions by one `nn.Embedding` with per-column
offsets, a two-layer `nn.TransformerEncoder` over the columns with pre-norm and GELU, 8 numeric columns
through `nn.LayerNorm`, a regression head, Huber loss), about 10 MB; `hashed`: a hashed-feature click model
(a 90,000-row `nn.Embedding` of 128 dimensions, dense gradients, 24 hashed ids per example mean-pooled,
with a two-layer MLP and binary cross-entropy), about 47 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen12:mobile --input benchmarks.unseen12:mobile_input \\
        --model benchmarks.unseen12:tabular --input benchmarks.unseen12:tabular_input \\
        --model benchmarks.unseen12:hashed --input benchmarks.unseen12:hashed_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(1201)

IMAGE = 32
CLASSES = 10
MOBILE_STAGES = ((16, 24, 2), (24, 40, 2), (40, 80, 1), (80, 112, 2))
"""(in channels, out channels, stride) of each inverted residual block."""
EXPANSION = 4
COLUMNS = 16
CATEGORIES = 2000
TAB_DIM = 64
NUMERIC = 8
HASH_ROWS = 90_000
HASH_DIM = 128
HASH_IDS = 24
CLICK_HIDDEN = 256


class _InvertedResidual(nn.Module):
    def __init__(self, channels_in: int, channels_out: int, stride: int) -> None:
        super().__init__()
        wide = channels_in * EXPANSION
        self.expand = nn.Sequential(
            nn.Conv2d(channels_in, wide, 1, bias=False), nn.BatchNorm2d(wide), nn.ReLU6()
        )
        self.depthwise = nn.Sequential(
            nn.Conv2d(wide, wide, 3, stride=stride, padding=1, groups=wide, bias=False),
            nn.BatchNorm2d(wide),
            nn.ReLU6(),
        )
        self.excite = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(wide, wide // 4, 1),
            nn.ReLU(),
            nn.Conv2d(wide // 4, wide, 1),
            nn.Hardsigmoid(),
        )
        self.project = nn.Sequential(
            nn.Conv2d(wide, channels_out, 1, bias=False), nn.BatchNorm2d(channels_out)
        )
        self.residual = stride == 1 and channels_in == channels_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.depthwise(self.expand(x))
        y = self.project(y * self.excite(y))
        out: torch.Tensor = x + y if self.residual else y
        return out


class _Mobile(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU6())
        self.blocks = nn.Sequential(*(_InvertedResidual(i, o, s) for i, o, s in MOBILE_STAGES))
        last = MOBILE_STAGES[-1][1]
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(last, CLASSES))

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(self.head(self.blocks(self.stem(images))), labels)


def mobile() -> nn.Module:
    return _Mobile()


def mobile_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.randn(batch, 3, IMAGE, IMAGE, generator=_inputs)
    return images, torch.randint(0, CLASSES, (batch,), generator=_inputs)


class _Tabular(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(COLUMNS * CATEGORIES, TAB_DIM)
        self.offsets: torch.Tensor
        self.register_buffer("offsets", torch.arange(COLUMNS) * CATEGORIES, persistent=False)
        layer = nn.TransformerEncoderLayer(
            TAB_DIM,
            nhead=4,
            dim_feedforward=4 * TAB_DIM,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.numeric = nn.LayerNorm(NUMERIC)
        self.head = nn.Sequential(nn.Linear(COLUMNS * TAB_DIM + NUMERIC, 256), nn.GELU(), nn.Linear(256, 1))

    def forward(self, categorical: torch.Tensor, numeric: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        columns = self.encoder(self.embed(categorical + self.offsets))
        joined = torch.cat([columns.flatten(1), self.numeric(numeric)], dim=1)
        return nn.functional.huber_loss(self.head(joined).squeeze(1), target)


def tabular() -> nn.Module:
    return _Tabular()


def tabular_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    categorical = torch.randint(0, CATEGORIES, (batch, COLUMNS), generator=_inputs)
    numeric = torch.randn(batch, NUMERIC, generator=_inputs)
    return categorical, numeric, torch.randn(batch, generator=_inputs)


class _Hashed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(HASH_ROWS, HASH_DIM)
        self.mlp = nn.Sequential(
            nn.Linear(HASH_DIM, CLICK_HIDDEN), nn.ReLU(), nn.Linear(CLICK_HIDDEN, CLICK_HIDDEN), nn.ReLU()
        )
        self.head = nn.Linear(CLICK_HIDDEN, 1)

    def forward(self, ids: torch.Tensor, clicked: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.mlp(self.table(ids).mean(dim=1))).squeeze(1)
        return nn.functional.binary_cross_entropy_with_logits(logits, clicked)


def hashed() -> nn.Module:
    return _Hashed()


def hashed_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, HASH_ROWS, (batch, HASH_IDS), generator=_inputs)
    return ids, torch.randint(0, 2, (batch,), generator=_inputs).float()
