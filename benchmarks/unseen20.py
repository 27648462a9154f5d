"""A twentieth unseen set for issue #17's honesty protocol: protocol run 20.

Written on 2026-11-26 (shell clock), on round 15's code unchanged (main 4d3ada8: the compute band term
is the host's drift between timing passes net of their sampling noise, over the runs a measured mean
averages), after protocol run 19 and before any run of these models. Run 20 is a second sample of that
code on new models, as run 15 was of round 11's. The nineteen earlier sets are no longer unseen; these
three are new and were never profiled, simulated or validated before their protocol run (only their
parameter counts, one forward+backward on this machine's full core, and that every parameter gets a
gradient, so that DDP accepts them on several hosts, were checked). They differ from the shipped models
(cnn, wide_mlp, transformer), the development models (benchmarks/devmodels.py) and all earlier sets in
layer types and gradient sizes:

`circnet`: a multi-label image tagger of three `nn.Conv2d` behind `nn.CircularPad2d`, with
`nn.FractionalMaxPool2d`, `nn.Dropout2d` and `nn.Softplus`, a `nn.Sigmoid` head and `nn.BCELoss` against
multi-hot tags; about 1.1 MB of gradients. `sessrec`: a session recommender with a 28,000-item
`nn.Embedding` of 96 dimensions (`scale_grad_by_freq`), an `nn.LSTMCell` unrolled over the session's ten
items and `nn.CosineEmbeddingLoss` against the next item's embedding; about 11.7 MB. `siamrank`: a
pairwise ranker whose shared tower is three `nn.Linear` (600 → 3200 → 2560 → 384) with `nn.Tanhshrink` and
a `nn.Hardsigmoid` self-gate, scored by `nn.PairwiseDistance` and `nn.SoftMarginLoss`; about 44.5 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen20:circnet --input benchmarks.unseen20:circnet_input \\
        --model benchmarks.unseen20:sessrec --input benchmarks.unseen20:sessrec_input \\
        --model benchmarks.unseen20:siamrank --input benchmarks.unseen20:siamrank_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(2001)

IMAGE_SIDE = 24
TAGS = 12
ITEMS = 28_000
ITEM_DIM = 96
SESSION = 10
STATE = 192
FEATURES = 600


class _CircNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.CircularPad2d(1),
            nn.Conv2d(3, 48, 3),
            nn.Softplus(),
            nn.FractionalMaxPool2d(2, output_ratio=0.5),
            nn.CircularPad2d(1),
            nn.Conv2d(48, 112, 3),
            nn.Softplus(),
            nn.Dropout2d(0.1),
            nn.FractionalMaxPool2d(2, output_ratio=0.5),
            nn.CircularPad2d(1),
            nn.Conv2d(112, 208, 3),
            nn.Softplus(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(208, TAGS),
            nn.Sigmoid(),
        )
        self.loss = nn.BCELoss()

    def forward(self, image: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.loss(self.body(image), tags)
        return out


def circnet() -> nn.Module:
    return _CircNet()


def circnet_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    image = torch.rand(batch, 3, IMAGE_SIDE, IMAGE_SIDE, generator=_inputs)
    tags = (torch.rand(batch, TAGS, generator=_inputs) < 0.25).float()
    return image, tags


class _SessRec(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.items = nn.Embedding(ITEMS, ITEM_DIM, scale_grad_by_freq=True)
        self.cell = nn.LSTMCell(ITEM_DIM, STATE)
        self.out = nn.Linear(STATE, ITEM_DIM)
        self.loss = nn.CosineEmbeddingLoss(margin=0.1)

    def forward(self, session: torch.Tensor, target: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        vectors = self.items(session)
        h = vectors.new_zeros(session.shape[0], STATE)
        c = vectors.new_zeros(session.shape[0], STATE)
        for step in range(session.shape[1]):
            h, c = self.cell(vectors[:, step], (h, c))
        out: torch.Tensor = self.loss(self.out(h), self.items(target), label)
        return out


def sessrec() -> nn.Module:
    return _SessRec()


def sessrec_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    session = torch.randint(0, ITEMS, (batch, SESSION), generator=_inputs)
    target = torch.randint(0, ITEMS, (batch,), generator=_inputs)
    label = torch.where(torch.rand(batch, generator=_inputs) < 0.8, 1.0, -1.0)
    return session, target, label


class _SiamRank(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Sequential(nn.Linear(FEATURES, 3200), nn.Tanhshrink())
        self.second = nn.Linear(3200, 2560)
        self.gate = nn.Hardsigmoid()
        self.third = nn.Linear(2560, 384)
        self.distance = nn.PairwiseDistance()
        self.loss = nn.SoftMarginLoss()

    def tower(self, x: torch.Tensor) -> torch.Tensor:
        h = self.second(self.first(x))
        out: torch.Tensor = self.third(h * self.gate(h))
        return out

    def forward(
        self, query: torch.Tensor, left: torch.Tensor, right: torch.Tensor, prefer: torch.Tensor
    ) -> torch.Tensor:
        q = self.tower(query)
        margin = self.distance(q, self.tower(right)) - self.distance(q, self.tower(left))
        out: torch.Tensor = self.loss(margin, prefer)
        return out


def siamrank() -> nn.Module:
    return _SiamRank()


def siamrank_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    query = torch.randn(batch, FEATURES, generator=_inputs)
    left = torch.randn(batch, FEATURES, generator=_inputs)
    right = torch.randn(batch, FEATURES, generator=_inputs)
    prefer = torch.where(torch.rand(batch, generator=_inputs) < 0.5, 1.0, -1.0)
    return query, left, right, prefer
