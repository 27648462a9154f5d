"""A third unseen set for issue #17's honesty protocol, written by the lead after modelling round 3.

Written on 2026-11-24 at 05:10 UTC, after round 3 (update_s measured inside the training loop, curve points
as the median of forward+backward of one step, the model-error term recalibrated on runs made with that
code) had landed on main (b00d2f5). The first two unseen sets (benchmarks/unseen.py, benchmarks/unseen2.py)
were used as calibration data by round 3, so they are no longer unseen; these three are new and were never
profiled or simulated before their protocol run. They differ from the shipped models (cnn, wide_mlp,
transformer), the development models (benchmarks/devmodels.py) and both earlier sets in layer types and
gradient sizes:

`squeeze`: a 2-D CNN of grouped convolutions with squeeze-and-excitation gates (GroupNorm, SiLU, channel
gating by a two-layer bottleneck) over 3×32×32 images, 0.94 MB of gradients; `perceiver`: a learned
latent array that cross-attends to 48 input tokens, then two latent self-attention blocks
(nn.MultiheadAttention, GELU MLPs, LayerNorm), 11.1 MB; `bagrec`: a recommender over bags of 24 item
ids (nn.EmbeddingBag of 120,000 items, dense gradients, summed) with a cross network and an MLP head,
44.2 MB, almost all in the embedding.

    sudo .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen3:squeeze --input benchmarks.unseen3:squeeze_input \\
        --model benchmarks.unseen3:perceiver --input benchmarks.unseen3:perceiver_input \\
        --model benchmarks.unseen3:bagrec --input benchmarks.unseen3:bagrec_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(83)

PERCEIVER_TOKENS = 48
PERCEIVER_FEATURES = 40
BAGREC_ITEMS = 120_000
BAGREC_BAG = 24


class _SqueezeBlock(nn.Module):
    def __init__(self, channels_in: int, channels_out: int, stride: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(channels_in, channels_out, 3, stride=stride, padding=1, groups=4, bias=False),
            nn.GroupNorm(8, channels_out),
            nn.SiLU(),
            nn.Conv2d(channels_out, channels_out, 1, bias=False),
            nn.GroupNorm(8, channels_out),
        )
        self.gate = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(channels_out, channels_out // 4),
            nn.SiLU(),
            nn.Linear(channels_out // 4, channels_out),
            nn.Sigmoid(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        out: torch.Tensor = nn.functional.silu(y * self.gate(y)[:, :, None, None])
        return out


class _Squeeze(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.GroupNorm(8, 32), nn.SiLU())
        self.blocks = nn.Sequential(
            _SqueezeBlock(32, 64, 2),
            _SqueezeBlock(64, 64, 1),
            _SqueezeBlock(64, 128, 2),
            _SqueezeBlock(128, 128, 1),
            _SqueezeBlock(128, 192, 2),
        )
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(192, 10))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.blocks(self.stem(images)))
        return out


def squeeze() -> nn.Module:
    """Grouped-convolution CNN with squeeze-and-excitation gates: 0.25 M parameters."""
    torch.manual_seed(89)
    return _Squeeze()


def squeeze_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 3, 32, 32, generator=_inputs)


class _LatentBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attend = nn.MultiheadAttention(width, 8, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        x = self.norm1(latents)
        latents = latents + self.attend(x, x, x, need_weights=False)[0]
        out: torch.Tensor = latents + self.mlp(self.norm2(latents))
        return out


class _Perceiver(nn.Module):
    def __init__(self, width: int = 320, latents: int = 24) -> None:
        super().__init__()
        self.embed = nn.Linear(PERCEIVER_FEATURES, width)
        self.latents = nn.Parameter(torch.randn(latents, width) * 0.02)
        self.norm_in = nn.LayerNorm(width)
        self.cross = nn.MultiheadAttention(width, 4, batch_first=True)
        self.blocks = nn.Sequential(_LatentBlock(width), _LatentBlock(width))
        self.head = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 20))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        keys = self.norm_in(self.embed(tokens))
        query = self.latents.expand(tokens.shape[0], -1, -1)
        latents = query + self.cross(query, keys, keys, need_weights=False)[0]
        out: torch.Tensor = self.head(self.blocks(latents).mean(dim=1))
        return out


def perceiver() -> nn.Module:
    """Latent cross-attention then latent self-attention: 2.91 M parameters."""
    torch.manual_seed(97)
    return _Perceiver()


def perceiver_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, PERCEIVER_TOKENS, PERCEIVER_FEATURES, generator=_inputs)


class _BagRec(nn.Module):
    def __init__(self, width: int = 96) -> None:
        super().__init__()
        self.items = nn.EmbeddingBag(BAGREC_ITEMS, width, mode="sum")
        self.cross = nn.ModuleList([nn.Linear(width, width) for _ in range(3)])
        self.mlp = nn.Sequential(nn.Linear(width, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU())
        self.head = nn.Linear(64 + width, 1)

    def forward(self, bags: torch.Tensor) -> torch.Tensor:
        x0 = self.items(bags)
        x = x0
        for layer in self.cross:
            x = x0 * layer(x) + x
        out: torch.Tensor = self.head(torch.cat([x, self.mlp(x0)], dim=1))
        return out


def bagrec() -> nn.Module:
    """Bag-of-items recommender: 11.59 M parameters, 11.52 M of them in the EmbeddingBag."""
    torch.manual_seed(101)
    return _BagRec()


def bagrec_input(batch: int) -> torch.Tensor:
    return torch.randint(0, BAGREC_ITEMS, (batch, BAGREC_BAG), generator=_inputs)
