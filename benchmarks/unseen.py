"""Unseen models for issue #17's honesty protocol, written by the lead after the modelling work had landed.

Nobody developed, tuned or looked at the simulator on these: they were written on 2026-11-23 at 23:50 UTC,
after the overlap-slowdown term, the time-bounded runs and the bands were on main, and validated once
(docs/BENCHMARKS.md, "end-to-end accuracy (user models)"). They differ from the shipped models (cnn,
wide_mlp, transformer), from the development models of benchmarks/devmodels.py and from the issue's
examples in layer types and gradient sizes:

`sepconv`: a depthwise-separable CNN (MobileNet style) with GroupNorm and SiLU over 3×32×32 images,
~1.2 MB of gradients; `mixer`: an MLP-Mixer (patch embedding, token-mixing and channel-mixing MLPs with
LayerNorm and GELU) over 16 patches, ~17 MB; `deepfm`: a DeepFM click model (one embedding table shared by
six categorical fields, first-order weights, a factorisation-machine pairwise term and a deep MLP), ~50 MB,
almost all of it the dense gradient of the embedding table.

    sudo .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen:sepconv --input benchmarks.unseen:sepconv_input \\
        --model benchmarks.unseen:mixer --input benchmarks.unseen:mixer_input \\
        --model benchmarks.unseen:deepfm --input benchmarks.unseen:deepfm_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(23)

DEEPFM_FIELD_ROWS = (60_000, 50_000, 40_000, 30_000, 10_000, 5_000)
DEEPFM_DIM = 64


def _separable(channels_in: int, channels_out: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(channels_in, channels_in, 3, stride=stride, padding=1, groups=channels_in, bias=False),
        nn.GroupNorm(8, channels_in),
        nn.SiLU(),
        nn.Conv2d(channels_in, channels_out, 1, bias=False),
        nn.GroupNorm(8, channels_out),
        nn.SiLU(),
    )


def sepconv() -> nn.Module:
    """Depthwise-separable CNN: ~0.3 M parameters."""
    torch.manual_seed(31)
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1, bias=False),
        nn.GroupNorm(8, 32),
        nn.SiLU(),
        _separable(32, 64, 1),
        _separable(64, 128, 2),
        _separable(128, 128, 1),
        _separable(128, 256, 2),
        _separable(256, 256, 1),
        _separable(256, 256, 1),
        _separable(256, 384, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(384, 10),
    )


def sepconv_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 3, 32, 32, generator=_inputs)


class _MixerBlock(nn.Module):
    def __init__(self, tokens: int, channels: int) -> None:
        super().__init__()
        self.token_norm = nn.LayerNorm(channels)
        self.token_mlp = nn.Sequential(
            nn.Linear(tokens, 4 * tokens), nn.GELU(), nn.Linear(4 * tokens, tokens)
        )
        self.channel_norm = nn.LayerNorm(channels)
        self.channel_mlp = nn.Sequential(
            nn.Linear(channels, 4 * channels), nn.GELU(), nn.Linear(4 * channels, channels)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.token_norm(x).transpose(1, 2)).transpose(1, 2)
        out: torch.Tensor = x + self.channel_mlp(self.channel_norm(x))
        return out


class _Mixer(nn.Module):
    def __init__(self, *, channels: int = 256, blocks: int = 8) -> None:
        super().__init__()
        self.patches = nn.Conv2d(3, channels, 8, stride=8)
        self.blocks = nn.Sequential(*(_MixerBlock(16, channels) for _ in range(blocks)))
        self.norm = nn.LayerNorm(channels)
        self.head = nn.Linear(channels, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        tokens = self.patches(images).flatten(2).transpose(1, 2)
        out: torch.Tensor = self.head(self.norm(self.blocks(tokens)).mean(dim=1))
        return out


def mixer() -> nn.Module:
    """MLP-Mixer over 16 patches of 8×8: ~4.3 M parameters."""
    torch.manual_seed(37)
    return _Mixer()


def mixer_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 3, 32, 32, generator=_inputs)


class _DeepFm(nn.Module):
    offsets: torch.Tensor  # the buffer registered in __init__

    def __init__(self) -> None:
        super().__init__()
        rows = sum(DEEPFM_FIELD_ROWS)
        self.embedding = nn.Embedding(rows, DEEPFM_DIM)
        self.first_order = nn.Embedding(rows, 1)
        fields = len(DEEPFM_FIELD_ROWS)
        self.deep = nn.Sequential(
            nn.Linear(fields * DEEPFM_DIM, 512),
            nn.ReLU(),
            nn.Linear(512, 256),
            nn.ReLU(),
            nn.Linear(256, 1),
        )
        offsets = torch.tensor((0, *DEEPFM_FIELD_ROWS[:-1])).cumsum(0)
        self.register_buffer("offsets", offsets, persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = ids + self.offsets
        vectors = self.embedding(rows)
        pairwise = 0.5 * (vectors.sum(dim=1).pow(2) - vectors.pow(2).sum(dim=1)).sum(dim=1, keepdim=True)
        linear = self.first_order(rows).sum(dim=1)
        out: torch.Tensor = linear + pairwise + self.deep(vectors.flatten(1))
        return out


def deepfm() -> nn.Module:
    """DeepFM over six categorical fields: ~12.9 M parameters, nearly all in the embedding table."""
    torch.manual_seed(41)
    return _DeepFm()


def deepfm_input(batch: int) -> torch.Tensor:
    columns = [torch.randint(0, rows, (batch, 1), generator=_inputs) for rows in DEEPFM_FIELD_ROWS]
    return torch.cat(columns, dim=1)
