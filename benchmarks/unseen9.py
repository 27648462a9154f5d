"""A ninth unseen set for issue #17's honesty protocol, written by the lead after protocol run 8.

Written on 2026-11-24 at about 22:13 UTC (shell clock), on round 8's code (dd77e03; nothing in srift/
changed after it), because run 8's `wavenet` (benchmarks/unseen8.py) could not train on more than one host:
its last layer's residual convolution is never used, and DDP refuses a model with parameters that get no
gradient; run 8 measured 20 of its 27 unseen cases. The eight earlier sets are no longer unseen; these three
are new and were never profiled, simulated or validated before their protocol run (only their parameter
counts, one forward+backward on this machine's full core, and that every parameter gets a gradient were
checked). They differ from the shipped models (cnn, wide_mlp, transformer), the development models
(benchmarks/devmodels.py) and all earlier sets in layer types and gradient sizes:

`voxnet`: a 3-D convolutional network over 1×16×16×16 volumes (four `nn.Conv3d` layers with `nn.GroupNorm`
and ReLU, 3-D max pooling after the first two, a linear head), about 1.2 MB of gradients; `autoencoder`: a
convolutional autoencoder over 3×32×32 images (strided 3×3 convolutions down to 4×4, a 3×3 bottleneck,
`nn.ConvTranspose2d` 4×4 stride-2 layers back up, ELU, a sigmoid output and a mean-square reconstruction
loss), about 6.5 MB;
`charcnn`: a subword text classifier (an `nn.Embedding` table of 110,000 × 104 with a padding index, a
1-D convolution over 48 tokens, max-over-time pooling, a highway layer, a 20-way head), about 46 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen9:voxnet --input benchmarks.unseen9:voxnet_input \\
        --model benchmarks.unseen9:autoencoder --input benchmarks.unseen9:autoencoder_input \\
        --model benchmarks.unseen9:charcnn --input benchmarks.unseen9:charcnn_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(601)

VOXELS = 16
VOX_CHANNELS = (16, 32, 64, 128)
CLASSES = 10
SUBWORDS = 110_000
SUBWORD_DIM = 104
TOKENS = 48
FILTERS = 128
TOPICS = 20


class _VoxNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        parts: list[nn.Module] = []
        channels = 1
        for i, out in enumerate(VOX_CHANNELS):
            parts += [nn.Conv3d(channels, out, 3, padding=1), nn.GroupNorm(8, out), nn.ReLU()]
            if i < 2:
                parts.append(nn.MaxPool3d(2))
            channels = out
        self.features = nn.Sequential(*parts)
        self.head = nn.Linear(channels, CLASSES)

    def forward(self, volumes: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        pooled = self.features(volumes).amax(dim=(2, 3, 4))
        return nn.functional.cross_entropy(self.head(pooled), labels)


def voxnet() -> nn.Module:
    """3-D convolutions with GroupNorm and 3-D max pooling over voxel volumes."""
    torch.manual_seed(607)
    return _VoxNet()


def voxnet_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    volumes = (torch.rand(batch, 1, VOXELS, VOXELS, VOXELS, generator=_inputs) < 0.3).float()
    return volumes, torch.randint(0, CLASSES, (batch,), generator=_inputs)


class _AutoEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encode = nn.Sequential(
            nn.Conv2d(3, 64, 3, stride=2, padding=1),
            nn.ELU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1),
            nn.ELU(),
            nn.Conv2d(128, 256, 3, stride=2, padding=1),
            nn.ELU(),
            nn.Conv2d(256, 256, 3, padding=1),
            nn.ELU(),
        )
        self.decode = nn.Sequential(
            nn.ConvTranspose2d(256, 128, 4, stride=2, padding=1),
            nn.ELU(),
            nn.ConvTranspose2d(128, 64, 4, stride=2, padding=1),
            nn.ELU(),
            nn.ConvTranspose2d(64, 3, 4, stride=2, padding=1),
            nn.Sigmoid(),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(self.decode(self.encode(images)), images)


def autoencoder() -> nn.Module:
    """Convolutional autoencoder: strided convolutions down, transposed convolutions up, reconstruction."""
    torch.manual_seed(613)
    return _AutoEncoder()


def autoencoder_input(batch: int) -> torch.Tensor:
    return torch.rand(batch, 3, 32, 32, generator=_inputs)


class _CharCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(SUBWORDS, SUBWORD_DIM, padding_idx=0)
        self.conv = nn.Conv1d(SUBWORD_DIM, FILTERS, 3, padding=1)
        self.transform = nn.Linear(FILTERS, FILTERS)
        self.gate = nn.Linear(FILTERS, FILTERS)
        self.head = nn.Linear(FILTERS, TOPICS)

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = self.conv(self.embed(tokens).transpose(1, 2)).relu().amax(dim=2)
        g = torch.sigmoid(self.gate(x))
        x = g * torch.relu(self.transform(x)) + (1 - g) * x
        return nn.functional.cross_entropy(self.head(x), labels)


def charcnn() -> nn.Module:
    """Subword embeddings, a 1-D convolution with max-over-time pooling, a highway layer."""
    torch.manual_seed(617)
    return _CharCNN()


def charcnn_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(1, SUBWORDS, (batch, TOKENS), generator=_inputs)
    tokens[:, -8:] = 0  # padding at the end of each text
    return tokens, torch.randint(0, TOPICS, (batch,), generator=_inputs)
