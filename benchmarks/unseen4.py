"""A fourth unseen set for issue #17's honesty protocol, written by the lead after modelling round 4.

Written on 2026-11-24 at 08:22 UTC, after round 4 (DDP's buckets from per-parameter layers, the idle-compute
measurement, the model-error term recalibrated on a run of the dev models and the third unseen set) had
landed on main (6cfe726). The three earlier sets (benchmarks/unseen.py, unseen2.py, unseen3.py) were used
as development or calibration data, so they are no longer unseen; these three are new and were never
profiled or simulated before their protocol run. They differ from the shipped models (cnn, wide_mlp,
transformer), the development models (benchmarks/devmodels.py) and all earlier sets in layer types and
gradient sizes:

`upsampler`: an image encoder-decoder (strided convolutions down, transposed convolutions and a
PixelShuffle up, InstanceNorm with affine weights, LeakyReLU, a skip connection) over 3×24×24 images,
1.12 MB of gradients; `graphnet`: a dense graph network (node features mixed along a batch of 24-node
adjacency matrices with `torch.bmm`, gated by a bilinear edge score, BatchNorm1d, PReLU), 12.4 MB;
`textcnn`: a text classifier over 48-token sequences (an `nn.Embedding` of 50,000 words × 240 with dense
gradients, parallel Conv1d filters of widths 3, 4 and 5, max-pooling over time, dropout), 49.1 MB, almost
all in the embedding.

    sudo .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen4:upsampler --input benchmarks.unseen4:upsampler_input \\
        --model benchmarks.unseen4:graphnet --input benchmarks.unseen4:graphnet_input \\
        --model benchmarks.unseen4:textcnn --input benchmarks.unseen4:textcnn_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(101)

GRAPH_NODES = 24
GRAPH_FEATURES = 32
TEXT_WORDS = 50_000
TEXT_TOKENS = 48


class _Upsampler(nn.Module):
    def __init__(self) -> None:
        super().__init__()

        def down(c_in: int, c_out: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(c_in, c_out, 4, stride=2, padding=1),
                nn.InstanceNorm2d(c_out, affine=True),
                nn.LeakyReLU(0.2),
            )

        self.down1 = down(3, 28)
        self.down2 = down(28, 56)
        self.down3 = down(56, 112)
        self.up1 = nn.Sequential(
            nn.ConvTranspose2d(112, 56, 4, stride=2, padding=1),
            nn.InstanceNorm2d(56, affine=True),
            nn.LeakyReLU(0.2),
        )
        self.up2 = nn.Sequential(
            nn.ConvTranspose2d(112, 28, 4, stride=2, padding=1),
            nn.InstanceNorm2d(28, affine=True),
            nn.LeakyReLU(0.2),
        )
        self.to_pixels = nn.Sequential(nn.Conv2d(28, 3 * 4, 3, padding=1), nn.PixelShuffle(2), nn.Tanh())

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(images)
        d2 = self.down2(d1)
        u1 = self.up1(self.down3(d2))
        u2 = self.up2(torch.cat([u1, d2], dim=1))
        out: torch.Tensor = (self.to_pixels(u2) - images).abs()
        return out


def upsampler() -> nn.Module:
    """Strided-convolution encoder, transposed-convolution decoder with a skip: 0.28 M parameters."""
    torch.manual_seed(103)
    return _Upsampler()


def upsampler_input(batch: int) -> torch.Tensor:
    return torch.rand(batch, 3, 24, 24, generator=_inputs) * 2 - 1


class _GraphLayer(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.message = nn.Linear(width, width)
        self.update = nn.Linear(2 * width, width)
        self.norm = nn.BatchNorm1d(width)
        self.act = nn.PReLU(width)

    def forward(self, nodes: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        mixed = torch.bmm(adjacency, self.message(nodes))
        h = self.update(torch.cat([nodes, mixed], dim=-1))
        h = self.norm(h.flatten(0, 1)).view_as(h)
        out: torch.Tensor = nodes + self.act(h.flatten(0, 1)).view_as(h)
        return out


class _GraphNet(nn.Module):
    def __init__(self, width: int = 576, layers: int = 3) -> None:
        super().__init__()
        self.embed = nn.Linear(GRAPH_FEATURES, width)
        self.score = nn.Bilinear(GRAPH_FEATURES, GRAPH_FEATURES, 1)
        self.layers = nn.ModuleList([_GraphLayer(width) for _ in range(layers)])
        self.readout = nn.Sequential(nn.Linear(width, 128), nn.PReLU(), nn.Linear(128, 6))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        b, n, f = features.shape
        left = features[:, :, None, :].expand(b, n, n, f).reshape(-1, f)
        right = features[:, None, :, :].expand(b, n, n, f).reshape(-1, f)
        adjacency = torch.softmax(self.score(left, right).view(b, n, n), dim=-1)
        nodes = self.embed(features)
        for layer in self.layers:
            nodes = layer(nodes, adjacency)
        out: torch.Tensor = self.readout(nodes.max(dim=1).values)
        return out


def graphnet() -> nn.Module:
    """Dense message passing over learned soft adjacency (bilinear edge scores): 3.09 M parameters."""
    torch.manual_seed(107)
    return _GraphNet()


def graphnet_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, GRAPH_NODES, GRAPH_FEATURES, generator=_inputs)


class _TextCNN(nn.Module):
    def __init__(self, width: int = 240, filters: int = 96) -> None:
        super().__init__()
        self.words = nn.Embedding(TEXT_WORDS, width, padding_idx=0)
        self.convs = nn.ModuleList([nn.Conv1d(width, filters, k) for k in (3, 4, 5)])
        self.drop = nn.Dropout(0.3)
        self.head = nn.Linear(3 * filters, 4)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.words(tokens).transpose(1, 2)
        pooled = [torch.relu(conv(x)).amax(dim=2) for conv in self.convs]
        out: torch.Tensor = self.head(self.drop(torch.cat(pooled, dim=1)))
        return out


def textcnn() -> nn.Module:
    """Word embedding (dense gradients) and parallel 1-D convolutions: 12.3 M parameters."""
    torch.manual_seed(109)
    return _TextCNN()


def textcnn_input(batch: int) -> torch.Tensor:
    return torch.randint(0, TEXT_WORDS, (batch, TEXT_TOKENS), generator=_inputs)
