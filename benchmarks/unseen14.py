"""A fourteenth unseen set for issue #17's honesty protocol, written by the lead after round 11's change.

Written on 2026-11-25 (shell clock), on commit 3f8938b (round 11: a model keeps the further timing passes
that fit the quick matrix's 30 s a model; docs/validation.md, round 11). The thirteen earlier sets are no
longer unseen; these three are new and were never profiled, simulated or validated before their protocol
run (only their parameter counts, one forward+backward on this machine's full core, and that every
parameter gets a gradient, so that DDP accepts them on several hosts, were checked). They differ from the
shipped models (cnn, wide_mlp, transformer), the development models (benchmarks/devmodels.py) and all
earlier sets in layer types and gradient sizes:

`patchfold`: a patch denoiser over 3×32×32 images (`nn.ReflectionPad2d`, overlapping 8×8 patches taken by
`nn.Unfold` at stride 4, a per-patch MLP with CELU, put back by `nn.Fold` as an overlap-add, a 3×3
convolution with `nn.LocalResponseNorm`; mean squared error to the clean image), about 1.2 MB of
gradients; `adaptive`: a word-level language model (a 20,000-word `nn.Embedding` of 192 dimensions, three
causal gated convolutions with `nn.GLU`, an `nn.AdaptiveLogSoftmaxWithLoss` head with clusters at 2,000 and
8,000 words; 32 tokens), about 19 MB; `triplet`: a metric-learning encoder of 4,096-feature vectors
(`nn.Linear(4096, 2048)`, CELU, `nn.AlphaDropout`, `nn.Linear(2048, 1024)`, unit-normalised) trained with
`nn.TripletMarginWithDistanceLoss` on cosine distance over anchor, positive and negative, about 42 MB.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen14:patchfold --input benchmarks.unseen14:patchfold_input \\
        --model benchmarks.unseen14:adaptive --input benchmarks.unseen14:adaptive_input \\
        --model benchmarks.unseen14:triplet --input benchmarks.unseen14:triplet_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(1401)

IMAGE = 32
PATCH = 8
STRIDE = 4
PAD = 4
PATCH_DIM = 3 * PATCH * PATCH
PATCH_HIDDEN = 768
VOCAB = 20_000
CUTOFFS = [2_000, 8_000]
LM_DIM = 192
LM_TOKENS = 32
GATED_LAYERS = 3
KERNEL = 3
FEATURES = 4096
TRIPLET_HIDDEN = 2048
TRIPLET_OUT = 1024


class _PatchFold(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        padded = IMAGE + 2 * PAD
        self.pad = nn.ReflectionPad2d(PAD)
        self.unfold = nn.Unfold(PATCH, stride=STRIDE)
        self.mlp = nn.Sequential(
            nn.Linear(PATCH_DIM, PATCH_HIDDEN), nn.CELU(), nn.Linear(PATCH_HIDDEN, PATCH_DIM)
        )
        self.fold = nn.Fold(padded, PATCH, stride=STRIDE)
        self.counts: torch.Tensor
        self.register_buffer(
            "counts", self.fold(self.unfold(torch.ones(1, 3, padded, padded))), persistent=False
        )
        self.refine = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.LocalResponseNorm(3))

    def forward(self, noisy: torch.Tensor, clean: torch.Tensor) -> torch.Tensor:
        patches = self.unfold(self.pad(noisy)).transpose(1, 2)
        summed = self.fold(self.mlp(patches).transpose(1, 2)) / self.counts
        restored = self.refine(summed[:, :, PAD:-PAD, PAD:-PAD])
        return nn.functional.mse_loss(restored, clean)


def patchfold() -> nn.Module:
    return _PatchFold()


def patchfold_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    clean = torch.rand(batch, 3, IMAGE, IMAGE, generator=_inputs)
    return clean + 0.1 * torch.randn(batch, 3, IMAGE, IMAGE, generator=_inputs), clean


class _GatedConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(LM_DIM, 2 * LM_DIM, KERNEL)
        self.gate = nn.GLU(dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = x + self.gate(self.conv(nn.functional.pad(x, (KERNEL - 1, 0))))
        return out


class _Adaptive(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, LM_DIM)
        self.layers = nn.Sequential(*(_GatedConv() for _ in range(GATED_LAYERS)))
        self.head = nn.AdaptiveLogSoftmaxWithLoss(LM_DIM, VOCAB, cutoffs=CUTOFFS, div_value=4.0)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.layers(self.embed(tokens[:, :-1]).transpose(1, 2)).transpose(1, 2)
        loss: torch.Tensor = self.head(hidden.reshape(-1, LM_DIM), tokens[:, 1:].reshape(-1)).loss
        return loss


def adaptive() -> nn.Module:
    return _Adaptive()


def adaptive_input(batch: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, LM_TOKENS + 1), generator=_inputs)


class _Triplet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(FEATURES, TRIPLET_HIDDEN),
            nn.CELU(),
            nn.AlphaDropout(0.1),
            nn.Linear(TRIPLET_HIDDEN, TRIPLET_OUT),
        )
        self.loss = nn.TripletMarginWithDistanceLoss(
            distance_function=lambda a, b: 1.0 - nn.functional.cosine_similarity(a, b), margin=0.5
        )

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        encoded = nn.functional.normalize(self.encoder(torch.cat([anchor, positive, negative])), dim=1)
        a, p, n = encoded.chunk(3)
        out: torch.Tensor = self.loss(a, p, n)
        return out


def triplet() -> nn.Module:
    return _Triplet()


def triplet_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    anchor = torch.randn(batch, FEATURES, generator=_inputs)
    positive = anchor + 0.5 * torch.randn(batch, FEATURES, generator=_inputs)
    return anchor, positive, anchor + 0.8 * torch.randn(batch, FEATURES, generator=_inputs)
