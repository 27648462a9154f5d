"""An eighth unseen set for issue #17's honesty protocol, written by the lead after modelling round 8.

Written on 2026-11-24 at about 21:50 UTC (shell clock), after round 8 (the testbed's co-location factor
measured at the end of each multi-host run, with the together-steps' straggler cv; long DDP runs warming
up through DDP's bucket rebuild) was committed (dd77e03). The seven earlier sets (benchmarks/unseen.py …
unseen7.py) were used as development or calibration data, so they are no longer unseen; these three are
new and were never profiled, simulated or validated before their protocol run (only their parameter
counts and one forward+backward on this machine's full core were checked, for size). They differ from the
shipped models (cnn, wide_mlp, transformer), the development models (benchmarks/devmodels.py) and all
earlier sets in layer types and gradient sizes:

`wavenet`: a WaveNet-style stack over 1×128 signals (a causal 1-D convolution in, twelve residual layers of
dilated causal convolutions (dilations 1 … 32, twice) with tanh × sigmoid gates and 1×1 residual and skip
convolutions, a ReLU 1×1 head on the summed skips, classification), about 1 MB of gradients; `graphnet`: a
message-passing network over batches of dense 48-node graphs (a linear node encoder, four GraphSAGE-style
layers that concatenate each node's state with its degree-normalised neighbours' mean (`torch.bmm` with the
adjacency) and apply a linear layer, LayerNorm and SiLU, sum pooling and a regression head), about 5 MB;
`ncf`: neural collaborative filtering (user and item `nn.Embedding` tables of 60,000 × 96 each, a
generalised matrix-factorisation product beside an MLP tower on the concatenated embeddings, a logistic
output, binary cross-entropy), about 46 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen8:wavenet --input benchmarks.unseen8:wavenet_input \\
        --model benchmarks.unseen8:graphnet --input benchmarks.unseen8:graphnet_input \\
        --model benchmarks.unseen8:ncf --input benchmarks.unseen8:ncf_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(503)

CLASSES = 8
SIGNAL_LEN = 128
WAVE_CHANNELS = 64
DILATIONS = (1, 2, 4, 8, 16, 32) * 2
NODES = 48
NODE_FEATURES = 24
GRAPH_WIDTH = 384
GRAPH_LAYERS = 4
USERS = 60_000
ITEMS = 60_000
FACTORS = 96


class _CausalConv(nn.Conv1d):
    """A 1-D convolution that sees only the past: left padding of (kernel − 1) × dilation."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = (self.kernel_size[0] - 1) * self.dilation[0]
        return super().forward(nn.functional.pad(x, (pad, 0)))


class _GatedLayer(nn.Module):
    def __init__(self, dilation: int) -> None:
        super().__init__()
        self.dilated = _CausalConv(WAVE_CHANNELS, 2 * WAVE_CHANNELS, 2, dilation=dilation)
        self.residual = nn.Conv1d(WAVE_CHANNELS, WAVE_CHANNELS, 1)
        self.skip = nn.Conv1d(WAVE_CHANNELS, WAVE_CHANNELS, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        filt, gate = self.dilated(x).chunk(2, dim=1)
        y = torch.tanh(filt) * torch.sigmoid(gate)
        return x + self.residual(y), self.skip(y)


class _WaveNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.start = _CausalConv(1, WAVE_CHANNELS, 2)
        self.layers = nn.ModuleList(_GatedLayer(d) for d in DILATIONS)
        self.head = nn.Sequential(
            nn.ReLU(),
            nn.Conv1d(WAVE_CHANNELS, WAVE_CHANNELS, 1),
            nn.ReLU(),
            nn.Conv1d(WAVE_CHANNELS, CLASSES, 1),
        )

    def forward(self, signal: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = self.start(signal)
        skips = torch.zeros_like(x)
        for layer in self.layers:
            x, skip = layer(x)
            skips = skips + skip
        logits = self.head(skips).mean(dim=2)
        return nn.functional.cross_entropy(logits, labels)


def wavenet() -> nn.Module:
    """WaveNet-style: gated dilated causal convolutions with residual and skip connections."""
    torch.manual_seed(509)
    return _WaveNet()


def wavenet_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    signal = torch.randn(batch, 1, SIGNAL_LEN, generator=_inputs)
    return signal, torch.randint(0, CLASSES, (batch,), generator=_inputs)


class _SageLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.update = nn.Linear(2 * GRAPH_WIDTH, GRAPH_WIDTH)
        self.norm = nn.LayerNorm(GRAPH_WIDTH)

    def forward(self, h: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        neighbours = torch.bmm(adjacency, h)
        out: torch.Tensor = h + nn.functional.silu(self.norm(self.update(torch.cat([h, neighbours], dim=-1))))
        return out


class _GraphNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encode = nn.Linear(NODE_FEATURES, GRAPH_WIDTH)
        self.layers = nn.ModuleList(_SageLayer() for _ in range(GRAPH_LAYERS))
        self.head = nn.Sequential(nn.Linear(GRAPH_WIDTH, 128), nn.SiLU(), nn.Linear(128, 1))

    def forward(self, nodes: torch.Tensor, edges: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        degree = edges.sum(dim=-1, keepdim=True).clamp(min=1.0)
        adjacency = edges / degree
        h = self.encode(nodes)
        for layer in self.layers:
            h = layer(h, adjacency)
        return nn.functional.mse_loss(self.head(h.sum(dim=1)).squeeze(-1), target)


def graphnet() -> nn.Module:
    """Message passing over dense graphs: GraphSAGE-style mean aggregation by batched matmul, LayerNorm."""
    torch.manual_seed(521)
    return _GraphNet()


def graphnet_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    nodes = torch.randn(batch, NODES, NODE_FEATURES, generator=_inputs)
    edges = (torch.rand(batch, NODES, NODES, generator=_inputs) < 0.1).float()
    edges = ((edges + edges.transpose(1, 2)) > 0).float()
    return nodes, edges, torch.randn(batch, generator=_inputs)


class _NCF(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.users = nn.Embedding(USERS, FACTORS)
        self.items = nn.Embedding(ITEMS, FACTORS)
        self.tower = nn.Sequential(
            nn.Linear(2 * FACTORS, 256),
            nn.ReLU(),
            nn.Linear(256, 128),
            nn.ReLU(),
            nn.Linear(128, 64),
            nn.ReLU(),
        )
        self.out = nn.Linear(FACTORS + 64, 1)

    def forward(self, users: torch.Tensor, items: torch.Tensor, clicked: torch.Tensor) -> torch.Tensor:
        u, i = self.users(users), self.items(items)
        joined = torch.cat([u * i, self.tower(torch.cat([u, i], dim=-1))], dim=-1)
        logits = self.out(joined).squeeze(-1)
        return nn.functional.binary_cross_entropy_with_logits(logits, clicked)


def ncf() -> nn.Module:
    """Neural collaborative filtering: user and item embeddings, a matrix-factorisation product, an MLP."""
    torch.manual_seed(541)
    return _NCF()


def ncf_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # each sample: 16 (user, item) pairs, as a recommender batches a user's candidate items
    users = torch.randint(0, USERS, (batch * 16,), generator=_inputs)
    items = torch.randint(0, ITEMS, (batch * 16,), generator=_inputs)
    return users, items, (torch.rand(batch * 16, generator=_inputs) < 0.2).float()
