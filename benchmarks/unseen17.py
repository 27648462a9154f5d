"""A seventeenth unseen set for issue #17's honesty protocol: protocol run 17.

Written on 2026-11-26 (shell clock), on commit 2306a86 (round 13: the testbed hosts' malloc serves every
block from its heap, `MALLOC_MMAP_MAX_=0`), while a development check of that commit ran on the burned
unseen16 set, and before its result was read. Nothing from the check went into this set. The sixteen
earlier sets are no longer unseen; these three are new and were never profiled, simulated or validated
before their protocol run (only their parameter counts, one forward+backward on this machine's full core,
and that every parameter gets a gradient, so that DDP accepts them on several hosts, were checked). They
differ from the shipped models (cnn, wide_mlp, transformer), the development models
(benchmarks/devmodels.py) and all earlier sets in layer types and gradient sizes:

`ctcnet`: a speech-style frame labeller (strided and dilated `nn.Conv1d` over 40×64 feature frames with
`nn.BatchNorm1d` and `nn.Hardtanh`, `nn.Dropout1d`, a per-frame head over 20 symbols, `nn.CTCLoss` against
12-symbol targets), about 1.1 MB of gradients; `kgscore`: a knowledge-graph link scorer (a 12,000-entity
`nn.Embedding` of 256 dimensions and a 64-relation one, DistMult-style head × relation products, scored
against every entity, cross-entropy over the tail), about 12.6 MB; `wideconv`: a wide 1-D convolution
stack (four `nn.Conv1d` of 1,024 channels, kernel 3, over 16 steps, `nn.GroupNorm` and `nn.Softsign`,
a residual sum, an L1 loss to a target sequence), about 50 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen17:ctcnet --input benchmarks.unseen17:ctcnet_input \\
        --model benchmarks.unseen17:kgscore --input benchmarks.unseen17:kgscore_input \\
        --model benchmarks.unseen17:wideconv --input benchmarks.unseen17:wideconv_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(1701)

FEATURES = 40
FRAMES = 64
CTC_CHANNELS = 144
SYMBOLS = 20
TARGET_LEN = 12
ENTITIES = 12_000
RELATIONS = 64
KG_DIM = 256
WIDE_CHANNELS = 1024
WIDE_LAYERS = 4
WIDE_STEPS = 16


class _CtcNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv1d(FEATURES, CTC_CHANNELS, 5, padding=2),
            nn.BatchNorm1d(CTC_CHANNELS),
            nn.Hardtanh(0.0, 20.0),
        ]
        for dilation in (1, 2, 4, 8):
            layers += [
                nn.Conv1d(CTC_CHANNELS, CTC_CHANNELS, 3, padding=dilation, dilation=dilation),
                nn.BatchNorm1d(CTC_CHANNELS),
                nn.Hardtanh(0.0, 20.0),
                nn.Dropout1d(0.1),
            ]
        layers.append(nn.Conv1d(CTC_CHANNELS, SYMBOLS + 1, 1))
        self.body = nn.Sequential(*layers)
        self.loss = nn.CTCLoss(blank=0, zero_infinity=True)

    def forward(self, frames: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        log_probs = self.body(frames).permute(2, 0, 1).log_softmax(-1)
        batch = frames.shape[0]
        input_lengths = torch.full((batch,), FRAMES, dtype=torch.long)
        target_lengths = torch.full((batch,), TARGET_LEN, dtype=torch.long)
        out: torch.Tensor = self.loss(log_probs, targets, input_lengths, target_lengths)
        return out


def ctcnet() -> nn.Module:
    return _CtcNet()


def ctcnet_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    frames = torch.randn(batch, FEATURES, FRAMES, generator=_inputs)
    return frames, torch.randint(1, SYMBOLS + 1, (batch, TARGET_LEN), generator=_inputs)


class _KgScore(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.entities = nn.Embedding(ENTITIES, KG_DIM)
        self.relations = nn.Embedding(RELATIONS, KG_DIM)
        self.bias = nn.Parameter(torch.zeros(ENTITIES))
        self.loss = nn.CrossEntropyLoss(label_smoothing=0.05)

    def forward(self, heads: torch.Tensor, relations: torch.Tensor, tails: torch.Tensor) -> torch.Tensor:
        query = self.entities(heads) * self.relations(relations)
        scores = query @ self.entities.weight.t() + self.bias
        out: torch.Tensor = self.loss(scores, tails)
        return out


def kgscore() -> nn.Module:
    return _KgScore()


def kgscore_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    heads = torch.randint(0, ENTITIES, (batch,), generator=_inputs)
    relations = torch.randint(0, RELATIONS, (batch,), generator=_inputs)
    return heads, relations, torch.randint(0, ENTITIES, (batch,), generator=_inputs)


class _WideConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.Conv1d(WIDE_CHANNELS, WIDE_CHANNELS, 3, padding=1),
                nn.GroupNorm(16, WIDE_CHANNELS),
                nn.Softsign(),
            )
            for _ in range(WIDE_LAYERS)
        )
        self.loss = nn.L1Loss()

    def forward(self, signal: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        x = signal
        for block in self.blocks:
            x = x + block(x)
        out: torch.Tensor = self.loss(x, target)
        return out


def wideconv() -> nn.Module:
    return _WideConv()


def wideconv_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    signal = torch.randn(batch, WIDE_CHANNELS, WIDE_STEPS, generator=_inputs)
    return signal, torch.randn(batch, WIDE_CHANNELS, WIDE_STEPS, generator=_inputs)
