"""A sixth unseen set for issue #17's honesty protocol, written by the lead after modelling round 6.

Written on 2026-11-24 at about 14:40 UTC (shell clock), after round 6 (mixed rings probed and their measured
factors used by the network stage; the model-error term recalibrated on a run of the dev models and the
fifth unseen set) was committed (6458b4c). The five earlier sets (benchmarks/unseen.py … unseen5.py) were
used as development or calibration data, so they are no longer unseen; these three are new and were never
profiled or simulated before their protocol run. They differ from the shipped models (cnn, wide_mlp,
transformer), the development models (benchmarks/devmodels.py) and all earlier sets in layer types and
gradient sizes:

`vae`: a convolutional variational autoencoder over 1×28×28 images (strided Conv2d and Mish down, a
reparameterised 24-dimensional latent drawn inside forward, Linear and ConvTranspose2d up, a Bernoulli
reconstruction loss plus the KL term), 1.31 MB of gradients; `capsnet`: a capsule network (a 9×9
convolution, primary capsules from a strided 9×9 convolution, a learned transform per capsule pair,
three iterations of dynamic routing by agreement with squash, a margin loss), 6.96 MB; `skipgram`: a
word2vec skip-gram model with negative sampling (input and output `nn.Embedding` tables of 40,000 words ×
160 with dense gradients, dot products by `torch.bmm`, log-sigmoid loss over one context and eight sampled
negatives), 51.2 MB, all of it in the two tables.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.unseen6:vae --input benchmarks.unseen6:vae_input \\
        --model benchmarks.unseen6:capsnet --input benchmarks.unseen6:capsnet_input \\
        --model benchmarks.unseen6:skipgram --input benchmarks.unseen6:skipgram_input
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(307)

LATENT = 24
CAPSULE_TYPES = 16
CAPSULE_DIM = 8
CLASS_DIM = 16
CLASSES = 10
ROUTING_ITERATIONS = 3
WORDS = 40_000
WORD_DIM = 160
NEGATIVES = 8


class _Vae(nn.Module):
    def __init__(self, hidden: int = 96) -> None:
        super().__init__()
        self.encode = nn.Sequential(
            nn.Conv2d(1, 16, 4, stride=2, padding=1),
            nn.Mish(),
            nn.Conv2d(16, 32, 4, stride=2, padding=1),
            nn.Mish(),
            nn.Flatten(),
            nn.Linear(32 * 7 * 7, hidden),
            nn.Mish(),
        )
        self.mean = nn.Linear(hidden, LATENT)
        self.log_var = nn.Linear(hidden, LATENT)
        self.decode = nn.Sequential(
            nn.Linear(LATENT, hidden),
            nn.Mish(),
            nn.Linear(hidden, 32 * 7 * 7),
            nn.Mish(),
            nn.Unflatten(1, (32, 7, 7)),
            nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1),
            nn.Mish(),
            nn.ConvTranspose2d(16, 1, 4, stride=2, padding=1),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        code = self.encode(images)
        mean, log_var = self.mean(code), self.log_var(code)
        latent = mean + torch.randn_like(mean) * torch.exp(0.5 * log_var)
        logits = self.decode(latent)
        reconstruction = nn.functional.binary_cross_entropy_with_logits(logits, images, reduction="sum")
        kl = -0.5 * torch.sum(1 + log_var - mean.pow(2) - log_var.exp())
        return (reconstruction + kl) / images.shape[0]


def vae() -> nn.Module:
    """Convolutional VAE: reparameterised latent, Bernoulli reconstruction plus KL."""
    torch.manual_seed(311)
    return _Vae()


def vae_input(batch: int) -> torch.Tensor:
    return torch.rand(batch, 1, 28, 28, generator=_inputs)


def _squash(vectors: torch.Tensor, dim: int = -1) -> torch.Tensor:
    norm2 = (vectors * vectors).sum(dim=dim, keepdim=True)
    return vectors * norm2 / (1 + norm2) / torch.sqrt(norm2 + 1e-8)


class _CapsNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 96, 9)
        self.primary = nn.Conv2d(96, CAPSULE_TYPES * CAPSULE_DIM, 9, stride=2)
        capsules = CAPSULE_TYPES * 6 * 6
        self.transform = nn.Parameter(0.05 * torch.randn(capsules, CLASSES, CLASS_DIM, CAPSULE_DIM))

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        batch = images.shape[0]
        primary = self.primary(nn.functional.relu(self.conv(images)))
        primary = primary.view(batch, CAPSULE_TYPES, CAPSULE_DIM, 6, 6).permute(0, 1, 3, 4, 2)
        u = _squash(primary.reshape(batch, -1, CAPSULE_DIM))
        votes = torch.einsum("icdk,bik->bicd", self.transform, u)
        logits = torch.zeros(batch, votes.shape[1], CLASSES, device=images.device)
        for step in range(ROUTING_ITERATIONS):
            coupling = logits.softmax(dim=2)
            v = _squash((coupling.unsqueeze(-1) * votes).sum(dim=1))
            if step + 1 < ROUTING_ITERATIONS:
                logits = logits + (votes * v.unsqueeze(1)).sum(dim=-1)
        lengths = v.norm(dim=-1)
        present = nn.functional.one_hot(labels, CLASSES).to(lengths.dtype)
        margin = present * nn.functional.relu(0.9 - lengths) ** 2
        margin = margin + 0.5 * (1 - present) * nn.functional.relu(lengths - 0.1) ** 2
        return margin.sum(dim=1).mean()


def capsnet() -> nn.Module:
    """Capsule network with dynamic routing by agreement and a margin loss."""
    torch.manual_seed(313)
    return _CapsNet()


def capsnet_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.rand(batch, 1, 28, 28, generator=_inputs)
    return images, torch.randint(0, CLASSES, (batch,), generator=_inputs)


class _SkipGram(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.center = nn.Embedding(WORDS, WORD_DIM)
        self.context = nn.Embedding(WORDS, WORD_DIM)
        nn.init.uniform_(self.center.weight, -0.5 / WORD_DIM, 0.5 / WORD_DIM)

    def forward(self, center: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        c = self.center(center).unsqueeze(2)
        positive = torch.bmm(self.context(context).unsqueeze(1), c).view(-1)
        negative = torch.bmm(self.context(negatives), c).squeeze(2)
        loss = nn.functional.logsigmoid(positive) + nn.functional.logsigmoid(-negative).sum(dim=1)
        return -loss.mean()


def skipgram() -> nn.Module:
    """word2vec skip-gram with negative sampling over two dense-gradient embedding tables."""
    torch.manual_seed(317)
    return _SkipGram()


def skipgram_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    center = torch.randint(0, WORDS, (batch,), generator=_inputs)
    context = torch.randint(0, WORDS, (batch,), generator=_inputs)
    return center, context, torch.randint(0, WORDS, (batch, NEGATIVES), generator=_inputs)
