"""An eleventh unseen set for issue #17's honesty protocol, written by the lead after round 9's changes.

Written on 2026-11-25 at about 01:25 UTC (shell clock), on commit 0c3da10 (round 9: the exchange slowed
while members compute, co-location rounds on the wall clock after an idle quota period, and profile
breakpoints as the mean of their samples; docs/validation.md, round 9). The ten earlier sets are no longer
unseen; these three are new and were never profiled, simulated or validated before their protocol run (only
their parameter counts, one forward+backward on this machine's full core, and that every parameter gets a
gradient, so that DDP accepts them on several hosts, were checked). They differ from the shipped models
(cnn, wide_mlp, transformer), the development models (benchmarks/devmodels.py) and all earlier sets in
layer types and gradient sizes:

`spotter`: a keyword spotter over 40×40 log-mel spectrograms (dilated `nn.Conv2d` blocks with
`nn.GroupNorm` and Mish, residual, `nn.AdaptiveMaxPool2d`, 12 classes, cross-entropy), about 0.8 MB of
gradients; `reviewer`: a review classifier (an 8,000-word `nn.Embedding`, a bidirectional `nn.LSTM` of 128
units per direction over 40 tokens, additive attention pooling, 5 classes, cross-entropy), about 5 MB;
`matcher`: a two-input matching model (user and item feature vectors of 256 joined by an `nn.Bilinear`
layer of 192 outputs, then `nn.LayerNorm`, SiLU and a scoring head, binary cross-entropy), about 51 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen11:spotter --input benchmarks.unseen11:spotter_input \\
        --model benchmarks.unseen11:reviewer --input benchmarks.unseen11:reviewer_input \\
        --model benchmarks.unseen11:matcher --input benchmarks.unseen11:matcher_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(1101)

MELS = 40
FRAMES = 40
SPOTTER_CHANNELS = 72
SPOTTER_DILATIONS = (1, 2, 4, 1)
KEYWORDS = 12
VOCABULARY = 8000
REVIEW_TOKENS = 40
REVIEW_EMBEDDING = 128
REVIEW_HIDDEN = 128
RATINGS = 5
FEATURES = 256
MATCH_DIM = 192


class _SpotterBlock(nn.Module):
    def __init__(self, channels: int, dilation: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=dilation, dilation=dilation)
        self.norm = nn.GroupNorm(8, channels)
        self.act = nn.Mish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = x + self.act(self.norm(self.conv(x)))
        return out


class _Spotter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        c = SPOTTER_CHANNELS
        self.stem = nn.Sequential(nn.Conv2d(1, c, 5, stride=2, padding=2), nn.GroupNorm(8, c), nn.Mish())
        self.blocks = nn.Sequential(*(_SpotterBlock(c, d) for d in SPOTTER_DILATIONS))
        self.pool = nn.AdaptiveMaxPool2d(1)
        self.head = nn.Linear(c, KEYWORDS)

    def forward(self, spectrogram: torch.Tensor, keyword: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.pool(self.blocks(self.stem(spectrogram))).flatten(1))
        return nn.functional.cross_entropy(logits, keyword)


def spotter() -> nn.Module:
    return _Spotter()


def spotter_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    spectrogram = torch.randn(batch, 1, MELS, FRAMES, generator=_inputs)
    return spectrogram, torch.randint(0, KEYWORDS, (batch,), generator=_inputs)


class _Reviewer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCABULARY, REVIEW_EMBEDDING)
        self.lstm = nn.LSTM(REVIEW_EMBEDDING, REVIEW_HIDDEN, batch_first=True, bidirectional=True)
        self.score = nn.Sequential(nn.Linear(2 * REVIEW_HIDDEN, REVIEW_HIDDEN), nn.Tanh())
        self.query = nn.Linear(REVIEW_HIDDEN, 1, bias=False)
        self.head = nn.Linear(2 * REVIEW_HIDDEN, RATINGS)

    def forward(self, tokens: torch.Tensor, rating: torch.Tensor) -> torch.Tensor:
        states, _ = self.lstm(self.embed(tokens))
        weights = torch.softmax(self.query(self.score(states)), dim=1)
        return nn.functional.cross_entropy(self.head((weights * states).sum(dim=1)), rating)


def reviewer() -> nn.Module:
    return _Reviewer()


def reviewer_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(0, VOCABULARY, (batch, REVIEW_TOKENS), generator=_inputs)
    return tokens, torch.randint(0, RATINGS, (batch,), generator=_inputs)


class _Matcher(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.user = nn.Sequential(nn.Linear(FEATURES, FEATURES), nn.SiLU())
        self.item = nn.Sequential(nn.Linear(FEATURES, FEATURES), nn.SiLU())
        self.join = nn.Bilinear(FEATURES, FEATURES, MATCH_DIM)
        self.norm = nn.LayerNorm(MATCH_DIM)
        self.head = nn.Sequential(nn.SiLU(), nn.Linear(MATCH_DIM, 1))

    def forward(self, pair: torch.Tensor, match: torch.Tensor) -> torch.Tensor:
        user, item = pair[:, 0], pair[:, 1]
        logits = self.head(self.norm(self.join(self.user(user), self.item(item)))).squeeze(1)
        return nn.functional.binary_cross_entropy_with_logits(logits, match)


def matcher() -> nn.Module:
    return _Matcher()


def matcher_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    pair = torch.randn(batch, 2, FEATURES, generator=_inputs)
    return pair, torch.randint(0, 2, (batch,), generator=_inputs).float()
