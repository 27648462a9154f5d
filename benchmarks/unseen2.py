"""A second unseen set for issue #17's honesty protocol, written by the lead after modelling round 2.

Written on 2026-11-24 at 02:27 UTC, after the loop-overhead term, the model-error band term and the overlap
probe in validation had landed on main (b223c6c, 02:25 UTC), and validated once (docs/BENCHMARKS.md). The
first unseen set (benchmarks/unseen.py) was used as calibration data by that round, so it is no longer
unseen; these three are new and were never profiled or simulated before their protocol run. They differ
from the shipped models (cnn, wide_mlp, transformer), the development models (benchmarks/devmodels.py) and
the first unseen set in layer types and gradient sizes:

`unet1d`: a 1-D encoder-decoder (Conv1d, ConvTranspose1d, BatchNorm1d, ELU, skip concatenations) over
2×256 signals, 0.77 MB of gradients; `tagger`: a sequence tagger (embedding of 20,000 words, a bidirectional
LSTM, a per-token classifier) over 32 tokens, 12.3 MB, most of it the dense gradient of the embedding;
`pairnet`: a siamese pair scorer (a shared conv encoder with InstanceNorm and Hardswish, then nn.Bilinear
over the two codes), 42.8 MB, almost all in the bilinear weight.

    sudo .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen2:unet1d --input benchmarks.unseen2:unet1d_input \\
        --model benchmarks.unseen2:tagger --input benchmarks.unseen2:tagger_input \\
        --model benchmarks.unseen2:pairnet --input benchmarks.unseen2:pairnet_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(59)

TAGGER_WORDS = 20_000
TAGGER_TOKENS = 32


def _down(channels_in: int, channels_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv1d(channels_in, channels_out, 5, stride=2, padding=2),
        nn.BatchNorm1d(channels_out),
        nn.ELU(),
        nn.Conv1d(channels_out, channels_out, 3, padding=1),
        nn.BatchNorm1d(channels_out),
        nn.ELU(),
    )


class _Unet1d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.down1 = _down(2, 32)
        self.down2 = _down(32, 64)
        self.down3 = _down(64, 128)
        self.up3 = nn.ConvTranspose1d(128, 64, 4, stride=2, padding=1)
        self.merge3 = nn.Sequential(nn.Conv1d(128, 64, 3, padding=1), nn.BatchNorm1d(64), nn.ELU())
        self.up2 = nn.ConvTranspose1d(64, 32, 4, stride=2, padding=1)
        self.merge2 = nn.Sequential(nn.Conv1d(64, 32, 3, padding=1), nn.BatchNorm1d(32), nn.ELU())
        self.up1 = nn.ConvTranspose1d(32, 16, 4, stride=2, padding=1)
        self.out = nn.Conv1d(16, 2, 1)

    def forward(self, signal: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(signal)
        d2 = self.down2(d1)
        d3 = self.down3(d2)
        u3 = self.merge3(torch.cat([self.up3(d3), d2], dim=1))
        u2 = self.merge2(torch.cat([self.up2(u3), d1], dim=1))
        out: torch.Tensor = self.out(self.up1(u2))
        return out


def unet1d() -> nn.Module:
    """1-D U-Net: 0.19 M parameters."""
    torch.manual_seed(61)
    return _Unet1d()


def unet1d_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 2, 256, generator=_inputs)


class _Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.words = nn.Embedding(TAGGER_WORDS, 128)
        self.lstm = nn.LSTM(128, 192, batch_first=True, bidirectional=True)
        self.tags = nn.Sequential(nn.Dropout(0.1), nn.Linear(384, 48))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        states, _ = self.lstm(self.words(tokens))
        out: torch.Tensor = self.tags(states)
        return out


def tagger() -> nn.Module:
    """Bidirectional-LSTM tagger: 3.07 M parameters, 2.56 M of them in the word embedding."""
    torch.manual_seed(67)
    return _Tagger()


def tagger_input(batch: int) -> torch.Tensor:
    return torch.randint(0, TAGGER_WORDS, (batch, TAGGER_TOKENS), generator=_inputs)


class _PairNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 24, 3, stride=2, padding=1),
            nn.InstanceNorm2d(24, affine=True),
            nn.Hardswish(),
            nn.Conv2d(24, 48, 3, stride=2, padding=1),
            nn.InstanceNorm2d(48, affine=True),
            nn.Hardswish(),
            nn.AdaptiveMaxPool2d(4),
            nn.Flatten(),
            nn.Linear(48 * 16, 256),
            nn.Hardswish(),
        )
        self.score = nn.Bilinear(256, 256, 160)
        self.head = nn.Linear(160, 2)

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        left = self.encoder(pairs[:, 0])
        right = self.encoder(pairs[:, 1])
        out: torch.Tensor = self.head(torch.relu(self.score(left, right)))
        return out


def pairnet() -> nn.Module:
    """Siamese pair scorer: 10.7 M parameters, 10.5 M of them in nn.Bilinear."""
    torch.manual_seed(71)
    return _PairNet()


def pairnet_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 2, 3, 24, 24, generator=_inputs)
