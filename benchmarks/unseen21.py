"""A twenty-first unseen set for issue #17's honesty protocol: protocol run 21.

Written on 2026-11-26 (shell clock), on round 15's code unchanged (main 01751d1; no model change since
main 4d3ada8: the compute band term is the host's drift between timing passes net of their sampling noise,
over the runs a measured mean averages), after protocol run 20 and before any run of these models. Run 21
is a third sample of that code on new models (runs 19 and 20 were the first two). The twenty earlier sets
are no longer unseen; these three are new and were never profiled, simulated or validated before their
protocol run (only their parameter counts, one forward+backward on this machine's full core, and that
every parameter gets a gradient, so that DDP accepts them on several hosts, were checked). They differ
from the shipped models (cnn, wide_mlp, transformer), the development models (benchmarks/devmodels.py)
and all earlier sets in layer types and gradient sizes:

`keyspot`: a keyword spotter over 40 × 96 filterbank frames: `nn.ReflectionPad1d` before three of its four
`nn.Conv1d`, two of them dilated and grouped, with `nn.Mish`, `nn.LPPool1d` and `nn.AdaptiveAvgPool1d`,
scored by `nn.MultiLabelMarginLoss`; about 1.1 MB of gradients. `tripret`: a query retriever with a
22,000-token `nn.Embedding` of 128 dimensions (`padding_idx` 0), a `nn.Conv1d` over the tokens, `nn.SiLU`,
mean pooling and `nn.TripletMarginLoss` over anchor, positive and negative queries; about 11.8 MB.
`eventlm`: a next-event model of a single-layer `nn.LSTM` with a projection (`proj_size`) over twelve
event vectors and a 64,000-event `nn.Linear` head on the last state, scored by `nn.CrossEntropyLoss`
with label smoothing; about 44.3 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen21:keyspot --input benchmarks.unseen21:keyspot_input \\
        --model benchmarks.unseen21:tripret --input benchmarks.unseen21:tripret_input \\
        --model benchmarks.unseen21:eventlm --input benchmarks.unseen21:eventlm_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(2101)

BANDS = 40
FRAMES = 96
KEYWORDS = 12
TOKENS = 22_000
TOKEN_DIM = 128
QUERY = 16
EVENT_DIM = 96
EVENTS = 12
EVENT_TYPES = 64_000


class _KeySpot(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.ReflectionPad1d(2),
            nn.Conv1d(BANDS, 160, 5),
            nn.Mish(),
            nn.LPPool1d(2, 2),
            nn.ReflectionPad1d(2),
            nn.Conv1d(160, 320, 3, dilation=2, groups=2),
            nn.Mish(),
            nn.ReflectionPad1d(4),
            nn.Conv1d(320, 320, 3, dilation=4, groups=4),
            nn.Mish(),
            nn.Conv1d(320, 256, 1),
            nn.Mish(),
            nn.AdaptiveAvgPool1d(1),
            nn.Flatten(),
            nn.Linear(256, KEYWORDS),
        )
        self.loss = nn.MultiLabelMarginLoss()

    def forward(self, frames: torch.Tensor, keywords: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.loss(self.body(frames), keywords)
        return out


def keyspot() -> nn.Module:
    return _KeySpot()


def keyspot_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    frames = torch.randn(batch, BANDS, FRAMES, generator=_inputs)
    keywords = torch.full((batch, KEYWORDS), -1, dtype=torch.long)
    keywords[:, 0] = torch.randint(0, KEYWORDS, (batch,), generator=_inputs)
    return frames, keywords


class _TripRet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tokens = nn.Embedding(TOKENS, TOKEN_DIM, padding_idx=0)
        self.conv = nn.Conv1d(TOKEN_DIM, 256, 3, padding=1)
        self.act = nn.SiLU()
        self.out = nn.Linear(256, TOKEN_DIM)
        self.loss = nn.TripletMarginLoss(margin=0.5)

    def encode(self, query: torch.Tensor) -> torch.Tensor:
        h = self.act(self.conv(self.tokens(query).transpose(1, 2)))
        out: torch.Tensor = self.out(h.mean(dim=2))
        return out

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.loss(self.encode(anchor), self.encode(positive), self.encode(negative))
        return out


def tripret() -> nn.Module:
    return _TripRet()


def _queries(batch: int) -> torch.Tensor:
    query = torch.randint(1, TOKENS, (batch, QUERY), generator=_inputs)
    lengths = torch.randint(4, QUERY + 1, (batch, 1), generator=_inputs)
    return torch.where(torch.arange(QUERY) < lengths, query, 0)


def tripret_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _queries(batch), _queries(batch), _queries(batch)


class _EventLm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(EVENT_DIM, 640, batch_first=True, proj_size=160)
        self.head = nn.Linear(160, EVENT_TYPES)
        self.loss = nn.CrossEntropyLoss(label_smoothing=0.1)

    def forward(self, events: torch.Tensor, following: torch.Tensor) -> torch.Tensor:
        states, _ = self.rnn(events)
        out: torch.Tensor = self.loss(self.head(states[:, -1]), following)
        return out


def eventlm() -> nn.Module:
    return _EventLm()


def eventlm_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    events = torch.randn(batch, EVENTS, EVENT_DIM, generator=_inputs)
    following = torch.randint(0, EVENT_TYPES, (batch,), generator=_inputs)
    return events, following
