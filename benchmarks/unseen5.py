"""A fifth unseen set for issue #17's honesty protocol, written by the lead after modelling round 5.

Written on 2026-11-24 at about 12:00 UTC (shell clock), after round 5 (the fresh-quota term: `srift profile`
reads the host's CPU quota, the simulator shortens a waiting member's step by what the quota gives back;
the model-error term recalibrated on a run of the dev models and the fourth unseen set) was committed
(8068248). The four earlier sets (benchmarks/unseen.py … unseen4.py) were used as development or
calibration data, so they are no longer unseen; these three are new and were never profiled or simulated
before their protocol run. They differ from the shipped models (cnn, wide_mlp, transformer), the
development models (benchmarks/devmodels.py) and all earlier sets in layer types and gradient sizes:

`pointnet`: a point-cloud classifier (a shared per-point MLP as kernel-1 Conv1d layers with GroupNorm and
SiLU over 96 points, an order-invariant max-pool, a LayerNorm MLP head), 0.79 MB of gradients;
`moe`: a dense mixture-of-experts MLP (a softmax gate weighting ten GELU expert MLPs, combined with
`torch.einsum`, residual LayerNorm), 11.8 MB; `twotower`: a retrieval model trained with an
in-batch contrastive loss (a query tower over 16-token queries pooled from an `nn.Embedding` of 60,000
words × 192 with dense gradients, an item tower over an `nn.Embedding` of 8,000 items, cosine logits
against every item of the batch, cross-entropy), 50.6 MB, almost all in the embeddings.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen5:pointnet --input benchmarks.unseen5:pointnet_input \\
        --model benchmarks.unseen5:moe --input benchmarks.unseen5:moe_input \\
        --model benchmarks.unseen5:twotower --input benchmarks.unseen5:twotower_input
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(211)

POINTS = 96
MOE_FEATURES = 192
MOE_EXPERTS = 10
QUERY_WORDS = 60_000
QUERY_TOKENS = 16
ITEMS = 8_000


class _PointNet(nn.Module):
    def __init__(self, widths: tuple[int, ...] = (3, 96, 192, 384), classes: int = 16) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for c_in, c_out in itertools.pairwise(widths):
            layers += [nn.Conv1d(c_in, c_out, 1), nn.GroupNorm(8, c_out), nn.SiLU()]
        self.shared = nn.Sequential(*layers)
        self.head = nn.Sequential(
            nn.Linear(widths[-1], 256),
            nn.LayerNorm(256),
            nn.SiLU(),
            nn.Linear(256, classes),
        )

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        features = self.shared(points).amax(dim=2)
        out: torch.Tensor = self.head(features).logsumexp(dim=1)
        return out


def pointnet() -> nn.Module:
    """Shared per-point MLP, max-pool, MLP head."""
    torch.manual_seed(213)
    return _PointNet()


def pointnet_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 3, POINTS, generator=_inputs)


class _MixtureOfExperts(nn.Module):
    def __init__(self, width: int = 256, hidden: int = 512, classes: int = 1000) -> None:
        super().__init__()
        self.project = nn.Linear(MOE_FEATURES, width)
        self.gate = nn.Linear(width, MOE_EXPERTS)
        self.experts = nn.ModuleList(
            [
                nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))
                for _ in range(MOE_EXPERTS)
            ]
        )
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        x = self.project(features)
        weights = torch.softmax(self.gate(x), dim=-1)
        outputs = torch.stack([expert(x) for expert in self.experts], dim=1)
        mixed = torch.einsum("be,bew->bw", weights, outputs)
        out: torch.Tensor = torch.log_softmax(self.head(self.norm(x + mixed)), dim=-1)[:, 0]
        return -out


def moe() -> nn.Module:
    """A softmax-gated mixture of ten MLP experts (every expert runs; gradients are dense)."""
    torch.manual_seed(217)
    return _MixtureOfExperts()


def moe_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, MOE_FEATURES, generator=_inputs)


class _TwoTower(nn.Module):
    def __init__(self, width: int = 192, item_width: int = 128, out: int = 96) -> None:
        super().__init__()
        self.words = nn.Embedding(QUERY_WORDS, width, padding_idx=0)
        self.query = nn.Sequential(nn.Linear(width, 256), nn.ReLU(), nn.Linear(256, out))
        self.items = nn.Embedding(ITEMS, item_width)
        self.item = nn.Sequential(nn.Linear(item_width, 128), nn.ReLU(), nn.Linear(128, out))
        self.temperature = nn.Parameter(torch.tensor(10.0))

    def forward(self, tokens: torch.Tensor, item_ids: torch.Tensor) -> torch.Tensor:
        q = nn.functional.normalize(self.query(self.words(tokens).mean(dim=1)), dim=-1)
        i = nn.functional.normalize(self.item(self.items(item_ids)), dim=-1)
        logits = self.temperature * q @ i.T
        target = torch.arange(logits.shape[0], device=logits.device)
        return nn.functional.cross_entropy(logits, target)


def twotower() -> nn.Module:
    """Query and item towers over dense-gradient embeddings, in-batch contrastive loss."""
    torch.manual_seed(219)
    return _TwoTower()


def twotower_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(1, QUERY_WORDS, (batch, QUERY_TOKENS), generator=_inputs)
    return tokens, torch.randint(0, ITEMS, (batch,), generator=_inputs)
