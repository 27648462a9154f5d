"""A tenth unseen set for issue #17's honesty protocol, written by the lead after round 8's last change.

Written on 2026-11-24 at about 22:57 UTC (shell clock), on commit 346e3b4 (the co-location rounds on the
process's CPU clock; docs/validation.md cause 10), after protocol runs 8 and 9 on the code before it. The
nine earlier sets are no longer unseen; these three are new and were never profiled, simulated or validated
before their protocol run (only their parameter counts, one forward+backward on this machine's full core,
and that every parameter gets a gradient, so that DDP accepts them on several hosts, were checked). They
differ from the shipped models (cnn, wide_mlp, transformer), the development models (benchmarks/devmodels.py)
and all earlier sets in layer types and gradient sizes:

`hourglass`: a one-stack hourglass over 3×32×32 images (convolutions with `nn.InstanceNorm2d` and
Hardswish, `nn.AvgPool2d` down to 4×4, `nn.Upsample` back up with a skip convolution added at each scale,
eight heatmaps and a mean-square loss), about 1.3 MB of gradients; `captioner`: an image captioner (a
strided convolutional stem whose 6×6 cells are the memory of a two-layer `nn.TransformerDecoder` with
cross-attention, a causal mask, a 3,000-word `nn.Embedding`, learned positions and a vocabulary head), about
9 MB; `forecaster`: a multivariate time-series forecaster (a two-layer tanh `nn.RNN` of 1,024 units over 6
steps of 64 series, a two-layer MLP that predicts the next 32 steps, smooth-L1 loss), about 47 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen10:hourglass --input benchmarks.unseen10:hourglass_input \\
        --model benchmarks.unseen10:captioner --input benchmarks.unseen10:captioner_input \\
        --model benchmarks.unseen10:forecaster --input benchmarks.unseen10:forecaster_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(701)

HOURGLASS_CHANNELS = 64
HOURGLASS_LEVELS = 3
HEATMAPS = 8
IMAGE = 32
VOCABULARY = 3000
CAPTION_TOKENS = 16
CAPTION_DIM = 192
CAPTION_IMAGE = 24
SERIES = 64
HISTORY_STEPS = 6
RNN_UNITS = 1024
HORIZON_STEPS = 32
FORECAST_HIDDEN = 2816


def _conv_block(channels_in: int, channels_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(channels_in, channels_out, 3, padding=1),
        nn.InstanceNorm2d(channels_out, affine=True),
        nn.Hardswish(),
    )


class _Hourglass(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        c = HOURGLASS_CHANNELS
        self.stem = _conv_block(3, c)
        self.down = nn.ModuleList(_conv_block(c, c) for _ in range(HOURGLASS_LEVELS))
        self.skip = nn.ModuleList(_conv_block(c, c) for _ in range(HOURGLASS_LEVELS))
        self.up = nn.ModuleList(_conv_block(c, c) for _ in range(HOURGLASS_LEVELS))
        self.pool = nn.AvgPool2d(2)
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
        self.head = nn.Conv2d(c, HEATMAPS, 1)

    def forward(self, images: torch.Tensor, heatmaps: torch.Tensor) -> torch.Tensor:
        x = self.stem(images)
        skips = []
        for down, skip in zip(self.down, self.skip, strict=True):
            skips.append(skip(x))
            x = down(self.pool(x))
        for up in self.up:
            x = up(self.upsample(x) + skips.pop())
        return nn.functional.mse_loss(self.head(x), heatmaps)


def hourglass() -> nn.Module:
    """One hourglass stack: instance-normalised convolutions, average pooling down, upsampling with skips."""
    torch.manual_seed(707)
    return _Hourglass()


def hourglass_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.rand(batch, 3, IMAGE, IMAGE, generator=_inputs)
    return images, torch.rand(batch, HEATMAPS, IMAGE, IMAGE, generator=_inputs)


class _Captioner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        d = CAPTION_DIM
        self.stem = nn.Sequential(
            nn.Conv2d(3, d // 2, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(d // 2, d, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.words = nn.Embedding(VOCABULARY, d)
        self.positions = nn.Parameter(torch.randn(CAPTION_TOKENS, d) * 0.02)
        layer = nn.TransformerDecoderLayer(d, 4, dim_feedforward=512, dropout=0.0, batch_first=True)
        self.decoder = nn.TransformerDecoder(layer, num_layers=2)
        self.head = nn.Linear(d, VOCABULARY)
        self.register_buffer(
            "causal", nn.Transformer.generate_square_subsequent_mask(CAPTION_TOKENS - 1), persistent=False
        )

    def forward(self, images: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
        memory = self.stem(images).flatten(2).transpose(1, 2)
        given, wanted = captions[:, :-1], captions[:, 1:]
        x = self.words(given) + self.positions[: given.shape[1]]
        x = self.decoder(x, memory, tgt_mask=self.causal, tgt_is_causal=True)
        return nn.functional.cross_entropy(self.head(x).reshape(-1, VOCABULARY), wanted.reshape(-1))


def captioner() -> nn.Module:
    """A convolutional image stem as the memory of a transformer decoder that writes a caption."""
    torch.manual_seed(709)
    return _Captioner()


def captioner_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.rand(batch, 3, CAPTION_IMAGE, CAPTION_IMAGE, generator=_inputs)
    return images, torch.randint(0, VOCABULARY, (batch, CAPTION_TOKENS), generator=_inputs)


class _Forecaster(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.RNN(SERIES, RNN_UNITS, num_layers=2, nonlinearity="tanh", batch_first=True)
        self.head = nn.Sequential(
            nn.Linear(RNN_UNITS, FORECAST_HIDDEN),
            nn.Tanh(),
            nn.Linear(FORECAST_HIDDEN, HORIZON_STEPS * SERIES),
        )

    def forward(self, history: torch.Tensor, future: torch.Tensor) -> torch.Tensor:
        states, _ = self.rnn(history)
        forecast = self.head(states[:, -1]).view(-1, HORIZON_STEPS, SERIES)
        return nn.functional.smooth_l1_loss(forecast, future)


def forecaster() -> nn.Module:
    """A stacked tanh RNN over past steps of many series and an MLP that predicts the next steps."""
    torch.manual_seed(719)
    return _Forecaster()


def forecaster_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    history = torch.randn(batch, HISTORY_STEPS, SERIES, generator=_inputs)
    return history, torch.randn(batch, HORIZON_STEPS, SERIES, generator=_inputs)
