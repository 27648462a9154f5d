"""A thirteenth unseen set for issue #17's honesty protocol, written by the lead after round 10's change.

Written on 2026-11-25 (shell clock), on commit d28ef57 (round 10: a pooled profile is the mean over passes
of each pass's mean, eight timing passes in the quick matrix; docs/validation.md, round 10). The twelve
earlier sets are no longer unseen; these three are new and were never profiled, simulated or validated
before their protocol run (only their parameter counts, one forward+backward on this machine's full core,
and that every parameter gets a gradient, so that DDP accepts them on several hosts, were checked). They
differ from the shipped models (cnn, wide_mlp, transformer), the development models
(benchmarks/devmodels.py) and all earlier sets in layer types and gradient sizes:

`shuffle`: a ShuffleNet-style classifier over 3×32×32 images (an `nn.PixelUnshuffle` stem, units of a
grouped 1×1 convolution, `nn.ChannelShuffle`, a 3×3 depthwise convolution and a grouped 1×1 convolution,
`nn.BatchNorm2d` and SiLU; 10 classes, label-smoothed cross-entropy), about 1 MB of gradients;
`grulm`: a GRU language model (a 6,000-word `nn.Embedding` of 256 dimensions tied to the vocabulary head,
two GRU layers, `nn.RMSNorm`, next-token cross-entropy over 24 tokens), about 9 MB; `fourier`: a
random-Fourier-feature regressor (a fixed Gaussian projection of 32 inputs to 1,024 frequencies as a buffer,
cos and sin features, three residual `nn.Linear(2048, 2048)` blocks with `nn.RMSNorm` and SELU, a
smooth-L1 loss), about 51 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen13:shuffle --input benchmarks.unseen13:shuffle_input \\
        --model benchmarks.unseen13:grulm --input benchmarks.unseen13:grulm_input \\
        --model benchmarks.unseen13:fourier --input benchmarks.unseen13:fourier_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(1301)

IMAGE = 32
CLASSES = 10
SHUFFLE_GROUPS = 4
SHUFFLE_STAGES = ((48, 128, 1), (128, 256, 2), (256, 256, 1), (256, 384, 2))
"""(in channels, out channels, stride) of each shuffle unit."""
VOCAB = 6000
LM_DIM = 256
LM_TOKENS = 24
FOURIER_INPUTS = 32
FREQUENCIES = 1024
FOURIER_WIDTH = 2 * FREQUENCIES
FOURIER_BLOCKS = 3


class _ShuffleUnit(nn.Module):
    def __init__(self, channels_in: int, channels_out: int, stride: int) -> None:
        super().__init__()
        middle = channels_out // 2
        self.reduce = nn.Sequential(
            nn.Conv2d(channels_in, middle, 1, groups=SHUFFLE_GROUPS, bias=False),
            nn.BatchNorm2d(middle),
            nn.SiLU(),
            nn.ChannelShuffle(SHUFFLE_GROUPS),
        )
        self.depthwise = nn.Sequential(
            nn.Conv2d(middle, middle, 3, stride=stride, padding=1, groups=middle, bias=False),
            nn.BatchNorm2d(middle),
        )
        self.expand = nn.Sequential(
            nn.Conv2d(middle, channels_out, 1, groups=SHUFFLE_GROUPS, bias=False),
            nn.BatchNorm2d(channels_out),
        )
        self.shortcut: nn.Module = (
            nn.Identity()
            if stride == 1 and channels_in == channels_out
            else nn.Sequential(
                nn.AvgPool2d(3, stride=stride, padding=1),
                nn.Conv2d(channels_in, channels_out, 1, bias=False),
                nn.BatchNorm2d(channels_out),
            )
        )
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.act(self.shortcut(x) + self.expand(self.depthwise(self.reduce(x))))
        return out


class _Shuffle(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.PixelUnshuffle(2), nn.Conv2d(12, 48, 3, padding=1, bias=False), nn.BatchNorm2d(48), nn.SiLU()
        )
        self.units = nn.Sequential(*(_ShuffleUnit(i, o, s) for i, o, s in SHUFFLE_STAGES))
        last = SHUFFLE_STAGES[-1][1]
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(last, CLASSES))

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.units(self.stem(images)))
        return nn.functional.cross_entropy(logits, labels, label_smoothing=0.1)


def shuffle() -> nn.Module:
    return _Shuffle()


def shuffle_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.randn(batch, 3, IMAGE, IMAGE, generator=_inputs)
    return images, torch.randint(0, CLASSES, (batch,), generator=_inputs)


class _GruLm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, LM_DIM)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.gru = nn.GRU(LM_DIM, LM_DIM, num_layers=2, batch_first=True)
        self.norm = nn.RMSNorm(LM_DIM)
        self.head = nn.Linear(LM_DIM, VOCAB)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.gru(self.embed(tokens[:, :-1]))
        logits = self.head(self.norm(hidden))
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))


def grulm() -> nn.Module:
    return _GruLm()


def grulm_input(batch: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, LM_TOKENS + 1), generator=_inputs)


class _FourierBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(FOURIER_WIDTH)
        self.linear = nn.Linear(FOURIER_WIDTH, FOURIER_WIDTH)
        self.act = nn.SELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = x + self.act(self.linear(self.norm(x)))
        return out


class _Fourier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.frequencies: torch.Tensor
        self.register_buffer(
            "frequencies",
            torch.randn(FOURIER_INPUTS, FREQUENCIES, generator=torch.Generator().manual_seed(1302)),
            persistent=False,
        )
        self.blocks = nn.Sequential(*(_FourierBlock() for _ in range(FOURIER_BLOCKS)))
        self.head = nn.Linear(FOURIER_WIDTH, 1)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        phase = x @ self.frequencies
        features = torch.cat([torch.cos(phase), torch.sin(phase)], dim=1)
        return nn.functional.smooth_l1_loss(self.head(self.blocks(features)).squeeze(1), target)


def fourier() -> nn.Module:
    return _Fourier()


def fourier_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch, FOURIER_INPUTS, generator=_inputs), torch.randn(batch, generator=_inputs)
