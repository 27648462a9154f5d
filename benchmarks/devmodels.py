"""Development models for the end-to-end validation, deliberately unlike the shipped test models.

Used to look for causes of prediction errors on layer types and gradient sizes the shipped models
(`srift.profiling.testmodels`: cnn, wide_mlp, transformer) do not have, through the user-model path of
`srift validate --model MODULE:FACTORY --input MODULE:FACTORY`:

    sudo .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.devmodels:gru --input benchmarks.devmodels:gru_input \\
        --model benchmarks.devmodels:bn_mlp --input benchmarks.devmodels:bn_mlp_input \\
        --model benchmarks.devmodels:bag --input benchmarks.devmodels:bag_input

`gru`: a two-layer GRU over 16 steps of 64 features (recurrent layers, ~2.6 MB of gradients); `bn_mlp`: an
MLP with BatchNorm1d and dropout (module buffers, which DDP broadcasts before every forward; ~16 MB);
`bag`: a mean EmbeddingBag over 20 ids of a 50 000-row table and a small head (a dense 6.4 MB table
gradient); `tcn`: dilated Conv1d blocks with GroupNorm over 128 steps (~1 MB); `convfc`: two 3×3 convolutions
and max-pooling over 3×16×16 images feeding a wide fully connected classifier, AlexNet/VGG style
(~47.3 MB of gradients, almost all in one 4096×2880 layer: a single DDP bucket above the 25 MiB cap),
the communication-heavy model for checking that `--quick` stays within 15 minutes.
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(7)


class _Gru(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(64, 256, num_layers=2, batch_first=True)
        self.head = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        result: torch.Tensor = self.head(out[:, -1])
        return result


def gru() -> nn.Module:
    torch.manual_seed(11)
    return _Gru()


def gru_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 16, 64, generator=_inputs)


def bn_mlp() -> nn.Module:
    """Pointwise (kernel-1) layers over 8 positions, each followed by BatchNorm1d: an MLP with buffers."""
    torch.manual_seed(12)
    return nn.Sequential(
        nn.Conv1d(512, 1536, 1),
        nn.BatchNorm1d(1536),
        nn.ReLU(),
        nn.Dropout(0.1),
        nn.Conv1d(1536, 1536, 1),
        nn.BatchNorm1d(1536),
        nn.ReLU(),
        nn.Conv1d(1536, 512, 1),
        nn.BatchNorm1d(512),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(512 * 8, 10),
    )


def bn_mlp_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 512, 8, generator=_inputs)


class _Bag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(50_000, 32, mode="mean")
        self.head = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 10))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.bag(ids))
        return out


def bag() -> nn.Module:
    torch.manual_seed(13)
    return _Bag()


def bag_input(batch: int) -> torch.Tensor:
    return torch.randint(0, 50_000, (batch, 20), generator=_inputs)


class _Tcn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv1d(16, 96, 3, padding=1)]
        for dilation in (1, 2, 4, 8):
            layers += [
                nn.Conv1d(96, 96, 3, padding=dilation, dilation=dilation),
                nn.GroupNorm(8, 96),
                nn.GELU(),
            ]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(96, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.body(x).mean(dim=2))
        return out


def tcn() -> nn.Module:
    torch.manual_seed(14)
    return _Tcn()


def tcn_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 16, 128, generator=_inputs)


def convfc() -> nn.Module:
    """Conv feature extractor + one wide dense layer: 11.8 M parameters, 47.3 MB of fp32 gradients."""
    torch.manual_seed(15)
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(64 * 8 * 8, 2880),
        nn.ReLU(),
        nn.Linear(2880, 10),
    )


def convfc_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 3, 16, 16, generator=_inputs)
