"""A seventh unseen set for issue #17's honesty protocol, written by the lead after modelling round 7.

Written on 2026-11-24 at about 16:50 UTC (shell clock), after round 7 (gradient readiness read on the
process's CPU clock under a CPU quota; the model-error term calibrated on round 6's and round 7's dev runs
pooled) was committed (092c439). The six earlier sets (benchmarks/unseen.py … unseen6.py) were used as
development or calibration data, so they are no longer unseen; these three are new and were never profiled
or simulated before their protocol run. They differ from the shipped models (cnn, wide_mlp, transformer),
the development models (benchmarks/devmodels.py) and all earlier sets in layer types and gradient sizes:

`densenet`: a DenseNet-BC over 3×32×32 images (three dense blocks of bottleneck layers whose inputs are the
concatenation of every earlier layer's output, BatchNorm, 1×1 transitions with average pooling), about
1 MB of gradients; `convnext`: a ConvNeXt-style network (a 4×4 patchify stem, blocks of a 7×7 depthwise
convolution, LayerNorm over channels, an inverted GELU MLP and a learned per-channel layer scale, 2×2
strided downsampling between three stages), about 6 MB; `translator`: a sequence-to-sequence model (source
and target `nn.Embedding` tables of 16,000 words × 192, a one-layer `nn.LSTM` encoder and decoder, Luong
dot-product attention, a 16,000-way output projection, cross-entropy with teacher forcing), about 40 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen7:densenet --input benchmarks.unseen7:densenet_input \\
        --model benchmarks.unseen7:convnext --input benchmarks.unseen7:convnext_input \\
        --model benchmarks.unseen7:translator --input benchmarks.unseen7:translator_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(401)

CLASSES = 10
GROWTH = 16
DENSE_LAYERS = (4, 6, 6)
STAGE_DIMS = (64, 128, 256)
STAGE_DEPTHS = (2, 2, 2)
VOCAB = 16_000
WORD_DIM = 192
SOURCE_LEN = 16
TARGET_LEN = 10


class _DenseLayer(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.Conv2d(channels, 4 * GROWTH, 1, bias=False),
            nn.BatchNorm2d(4 * GROWTH),
            nn.ReLU(),
            nn.Conv2d(4 * GROWTH, GROWTH, 3, padding=1, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.body(x)], dim=1)


class _DenseNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        channels = 2 * GROWTH
        parts: list[nn.Module] = [nn.Conv2d(3, channels, 3, padding=1, bias=False)]
        for i, layers in enumerate(DENSE_LAYERS):
            for _ in range(layers):
                parts.append(_DenseLayer(channels))
                channels += GROWTH
            if i < len(DENSE_LAYERS) - 1:
                parts += [
                    nn.BatchNorm2d(channels),
                    nn.ReLU(),
                    nn.Conv2d(channels, channels // 2, 1, bias=False),
                    nn.AvgPool2d(2),
                ]
                channels //= 2
        parts += [nn.BatchNorm2d(channels), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.features = nn.Sequential(*parts)
        self.head = nn.Linear(channels, CLASSES)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(self.head(self.features(images)), labels)


def densenet() -> nn.Module:
    """DenseNet-BC: concatenating bottleneck layers with BatchNorm, 1×1 transitions and average pooling."""
    torch.manual_seed(403)
    return _DenseNet()


def densenet_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.rand(batch, 3, 32, 32, generator=_inputs)
    return images, torch.randint(0, CLASSES, (batch,), generator=_inputs)


class _ChannelNorm(nn.Module):
    """LayerNorm over the channels of an NCHW tensor."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return out


class _NextBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.depthwise = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.expand = nn.Linear(dim, 4 * dim)
        self.project = nn.Linear(4 * dim, dim)
        self.scale = nn.Parameter(torch.full((dim,), 0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.depthwise(x).permute(0, 2, 3, 1)
        y = self.project(nn.functional.gelu(self.expand(self.norm(y))))
        out: torch.Tensor = x + (self.scale * y).permute(0, 3, 1, 2)
        return out


class _ConvNeXt(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        parts: list[nn.Module] = [nn.Conv2d(3, STAGE_DIMS[0], 4, stride=4), _ChannelNorm(STAGE_DIMS[0])]
        for i, (dim, depth) in enumerate(zip(STAGE_DIMS, STAGE_DEPTHS, strict=True)):
            if i:
                parts += [_ChannelNorm(STAGE_DIMS[i - 1]), nn.Conv2d(STAGE_DIMS[i - 1], dim, 2, stride=2)]
            parts += [_NextBlock(dim) for _ in range(depth)]
        self.features = nn.Sequential(*parts)
        self.norm = nn.LayerNorm(STAGE_DIMS[-1])
        self.head = nn.Linear(STAGE_DIMS[-1], CLASSES)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        pooled = self.features(images).mean(dim=(2, 3))
        return nn.functional.cross_entropy(self.head(self.norm(pooled)), labels)


def convnext() -> nn.Module:
    """ConvNeXt-style: depthwise 7×7 convolutions, channel LayerNorm, inverted GELU MLPs, layer scale."""
    torch.manual_seed(409)
    return _ConvNeXt()


def convnext_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.rand(batch, 3, 32, 32, generator=_inputs)
    return images, torch.randint(0, CLASSES, (batch,), generator=_inputs)


class _Translator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.source = nn.Embedding(VOCAB, WORD_DIM)
        self.target = nn.Embedding(VOCAB, WORD_DIM)
        self.encoder = nn.LSTM(WORD_DIM, WORD_DIM, batch_first=True)
        self.decoder = nn.LSTM(WORD_DIM, WORD_DIM, batch_first=True)
        self.combine = nn.Linear(2 * WORD_DIM, WORD_DIM)
        self.out = nn.Linear(WORD_DIM, VOCAB)

    def forward(self, source: torch.Tensor, given: torch.Tensor, wanted: torch.Tensor) -> torch.Tensor:
        memory, state = self.encoder(self.source(source))
        decoded, _ = self.decoder(self.target(given), state)
        weights = torch.softmax(torch.bmm(decoded, memory.transpose(1, 2)), dim=-1)
        context = torch.bmm(weights, memory)
        hidden = torch.tanh(self.combine(torch.cat([decoded, context], dim=-1)))
        logits = self.out(hidden)
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), wanted.reshape(-1))


def translator() -> nn.Module:
    """Sequence to sequence: embeddings, LSTM encoder and decoder, dot-product attention, vocabulary head."""
    torch.manual_seed(419)
    return _Translator()


def translator_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    source = torch.randint(0, VOCAB, (batch, SOURCE_LEN), generator=_inputs)
    target = torch.randint(0, VOCAB, (batch, TARGET_LEN + 1), generator=_inputs)
    return source, target[:, :-1].contiguous(), target[:, 1:].contiguous()
