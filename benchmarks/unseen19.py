"""A nineteenth unseen set for issue #17's honesty protocol: protocol run 19.

Written on 2026-11-26 (shell clock), on round 15's code (commit ba8f3f3: the compute band term is the
host's drift between timing passes net of their sampling noise, over the runs a measured mean averages),
while a development check of that commit ran on the burned unseen18 set, and before its result was read
(after it, only these sizes were filled in and no model change followed). Nothing from the check went into
this set. The eighteen earlier sets
are no longer unseen; these three are new and were never profiled, simulated or validated before their
protocol run (only their parameter counts, one forward+backward on this machine's full core, and that
every parameter gets a gradient, so that DDP accepts them on several hosts, were checked). They differ
from the shipped models (cnn, wide_mlp, transformer), the development models (benchmarks/devmodels.py) and
all earlier sets in layer types and gradient sizes:

`sigpad`: a signal classifier of three `nn.Conv1d` (16 → 128 → 192 → 256 channels) behind
`nn.ReplicationPad1d`, with `nn.InstanceNorm1d` (affine), `nn.Hardshrink` and `nn.AvgPool1d`, pooled by
`nn.AdaptiveMaxPool1d`, `nn.LogSoftmax` and `nn.NLLLoss`; about 1.15 MB of gradients. `topicmix`: a
document model with a 20,000-word `nn.Embedding` of 160 dimensions (`padding_idx` 0), attention pooling
through `nn.Softmax` over the words, `nn.Threshold`, and `nn.KLDivLoss` against a topic distribution;
about 13.0 MB. `unpoolae`: an image autoencoder whose encoder's `nn.MaxPool2d` hands its indices to the
decoder's `nn.MaxUnpool2d`, a 640-wide bottleneck of two `nn.Linear` with `nn.Softshrink`,
`nn.ConstantPad2d` and `nn.HuberLoss`; about 47.3 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen19:sigpad --input benchmarks.unseen19:sigpad_input \\
        --model benchmarks.unseen19:topicmix --input benchmarks.unseen19:topicmix_input \\
        --model benchmarks.unseen19:unpoolae --input benchmarks.unseen19:unpoolae_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(1901)

SIG_CHANNELS = 16
SIG_LENGTH = 256
SIG_CLASSES = 10
WORDS = 20_000
WORD_DIM = 160
DOC_LENGTH = 48
TOPICS = 64
AE_SIDE = 24
AE_BOTTLENECK = 640


class _SigPad(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.ReplicationPad1d(3),
            nn.Conv1d(SIG_CHANNELS, 128, 7),
            nn.InstanceNorm1d(128, affine=True),
            nn.Hardshrink(0.1),
            nn.AvgPool1d(2),
            nn.ReplicationPad1d(2),
            nn.Conv1d(128, 192, 5),
            nn.InstanceNorm1d(192, affine=True),
            nn.Hardshrink(0.1),
            nn.AvgPool1d(2),
            nn.ReplicationPad1d(1),
            nn.Conv1d(192, 256, 3),
            nn.Hardshrink(0.1),
            nn.AdaptiveMaxPool1d(1),
            nn.Flatten(),
            nn.Linear(256, SIG_CLASSES),
            nn.LogSoftmax(dim=1),
        )
        self.loss = nn.NLLLoss()

    def forward(self, signal: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.loss(self.body(signal), label)
        return out


def sigpad() -> nn.Module:
    return _SigPad()


def sigpad_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    signal = torch.randn(batch, SIG_CHANNELS, SIG_LENGTH, generator=_inputs)
    return signal, torch.randint(0, SIG_CLASSES, (batch,), generator=_inputs)


class _TopicMix(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.words = nn.Embedding(WORDS, WORD_DIM, padding_idx=0)
        self.score = nn.Linear(WORD_DIM, 1)
        self.weights = nn.Softmax(dim=1)
        self.head = nn.Sequential(
            nn.Linear(WORD_DIM, 256), nn.Threshold(0.05, 0.0), nn.Linear(256, TOPICS), nn.LogSoftmax(dim=1)
        )
        self.loss = nn.KLDivLoss(reduction="batchmean")

    def forward(self, words: torch.Tensor, topics: torch.Tensor) -> torch.Tensor:
        vectors = self.words(words)
        pooled = (self.weights(self.score(vectors)) * vectors).sum(dim=1)
        out: torch.Tensor = self.loss(self.head(pooled), topics)
        return out


def topicmix() -> nn.Module:
    return _TopicMix()


def topicmix_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    words = torch.randint(1, WORDS, (batch, DOC_LENGTH), generator=_inputs)
    words[:, DOC_LENGTH - 8 :] = 0
    topics = torch.softmax(torch.randn(batch, TOPICS, generator=_inputs), dim=1)
    return words, topics


class _UnpoolAe(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encode = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.Softshrink(0.05), nn.Conv2d(32, 64, 3, padding=1)
        )
        self.pool = nn.MaxPool2d(2, return_indices=True)
        half = 64 * (AE_SIDE // 2) ** 2
        self.squeeze = nn.Linear(half, AE_BOTTLENECK)
        self.shrink = nn.Softshrink(0.05)
        self.expand = nn.Linear(AE_BOTTLENECK, half)
        self.unpool = nn.MaxUnpool2d(2)
        self.decode = nn.Sequential(nn.ConstantPad2d(1, 0.0), nn.Conv2d(64, 3, 3))
        self.loss = nn.HuberLoss(delta=0.5)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features, where = self.pool(self.encode(image))
        code = self.shrink(self.squeeze(features.flatten(1)))
        restored = self.unpool(self.expand(code).view_as(features), where)
        out: torch.Tensor = self.loss(self.decode(restored), image)
        return out


def unpoolae() -> nn.Module:
    return _UnpoolAe()


def unpoolae_input(batch: int) -> torch.Tensor:
    return torch.rand(batch, 3, AE_SIDE, AE_SIDE, generator=_inputs)
