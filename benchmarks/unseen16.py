"""A sixteenth unseen set for issue #17's honesty protocol: protocol run 16.

Written on 2026-11-26 (shell clock), on commit 03cffab (round 12's trial: a fresh-quota window of the burst
after idle that `srift profile` measures), while a development check of that commit ran on the burned
unseen14 set, and before its result was read. The check found the window worse, so round 12 withdrew it
(the burst is measured and kept, the simulator uses one period as before; docs/validation.md, round 12):
the code this set is run on is round 11's model with the burst recorded. Nothing from the check went into
this set. The fifteen earlier sets are no longer unseen; these three are new and were never profiled,
simulated or validated before their protocol run (only their parameter counts, one forward+backward on
this machine's full core, and that every parameter gets a gradient, so that DDP accepts them on several
hosts, were checked). They differ from the shipped models (cnn, wide_mlp, transformer), the development
models (benchmarks/devmodels.py) and all earlier sets in layer types and gradient sizes:

`pixshuf`: a super-resolution network (3×3 convolutions with `nn.PReLU` and `nn.InstanceNorm2d`, an
`nn.PixelShuffle` ×2 upsampler, smooth-L1 loss against a 2× target; 24×24 inputs), about 0.97 MB of
gradients; `rnntag`: a token tagger (an 18,000-word `nn.Embedding` of 192 dimensions, a two-layer
bidirectional `nn.RNN` with ReLU, a per-token linear head over 40 tags, cross-entropy; 32 tokens), about
16 MB; `bilin`: a pair scorer (two 512-feature inputs through `nn.SELU` projections, an `nn.Bilinear` of
512 × 512 → 40, `nn.AlphaDropout`, Huber loss), about 44 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen16:pixshuf --input benchmarks.unseen16:pixshuf_input \\
        --model benchmarks.unseen16:rnntag --input benchmarks.unseen16:rnntag_input \\
        --model benchmarks.unseen16:bilin --input benchmarks.unseen16:bilin_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(1601)

IMAGE = 24
SR_CHANNELS = 80
SR_BLOCKS = 4
VOCAB = 18_000
TAG_DIM = 192
TAG_HIDDEN = 256
TAG_TOKENS = 32
TAGS = 40
PAIR_FEATURES = 512
PAIR_OUT = 40


class _PixShuf(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        blocks: list[nn.Module] = [nn.Conv2d(3, SR_CHANNELS, 3, padding=1), nn.PReLU(SR_CHANNELS)]
        for _ in range(SR_BLOCKS):
            blocks += [
                nn.Conv2d(SR_CHANNELS, SR_CHANNELS, 3, padding=1),
                nn.InstanceNorm2d(SR_CHANNELS, affine=True),
                nn.PReLU(SR_CHANNELS),
            ]
        blocks += [nn.Conv2d(SR_CHANNELS, 3 * 4, 3, padding=1), nn.PixelShuffle(2)]
        self.body = nn.Sequential(*blocks)
        self.loss = nn.SmoothL1Loss()

    def forward(self, images: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.loss(self.body(images), target)
        return out


def pixshuf() -> nn.Module:
    return _PixShuf()


def pixshuf_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.rand(batch, 3, IMAGE, IMAGE, generator=_inputs)
    return images, torch.rand(batch, 3, 2 * IMAGE, 2 * IMAGE, generator=_inputs)


class _RnnTag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, TAG_DIM)
        self.rnn = nn.RNN(
            TAG_DIM, TAG_HIDDEN, num_layers=2, nonlinearity="relu", batch_first=True, bidirectional=True
        )
        self.head = nn.Linear(2 * TAG_HIDDEN, TAGS)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, tokens: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(self.embed(tokens))
        out: torch.Tensor = self.loss(self.head(hidden).reshape(-1, TAGS), tags.reshape(-1))
        return out


def rnntag() -> nn.Module:
    return _RnnTag()


def rnntag_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(0, VOCAB, (batch, TAG_TOKENS), generator=_inputs)
    return tokens, torch.randint(0, TAGS, (batch, TAG_TOKENS), generator=_inputs)


class _Bilin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Sequential(nn.Linear(PAIR_FEATURES, PAIR_FEATURES), nn.SELU())
        self.right = nn.Sequential(nn.Linear(PAIR_FEATURES, PAIR_FEATURES), nn.SELU())
        self.pair = nn.Bilinear(PAIR_FEATURES, PAIR_FEATURES, PAIR_OUT)
        self.drop = nn.AlphaDropout(0.1)
        self.score = nn.Linear(PAIR_OUT, 1)
        self.loss = nn.HuberLoss()

    def forward(self, left: torch.Tensor, right: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        joint = self.drop(nn.functional.selu(self.pair(self.left(left), self.right(right))))
        out: torch.Tensor = self.loss(self.score(joint).squeeze(1), target)
        return out


def bilin() -> nn.Module:
    return _Bilin()


def bilin_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    left = torch.randn(batch, PAIR_FEATURES, generator=_inputs)
    right = torch.randn(batch, PAIR_FEATURES, generator=_inputs)
    return left, right, torch.randn(batch, generator=_inputs)
