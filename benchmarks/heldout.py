"""The frozen held-out model set of the validation protocol (docs/validation.md): six models, 1–50 MB.

Written once on 2026-11-27, before any profile, prediction or validation run of them, and never edited
afterwards: a modelling change is judged on these models without anyone having seen how they behave. Only
their gradient sizes, one forward and backward on this machine, and that every parameter gets a gradient
(so that DDP accepts them on several hosts) were checked when they were written. They differ from the
shipped models (cnn, wide_mlp, transformer) in layer types, gradient sizes and compute per byte:

- `charcnn` (~1.7 MB of gradients): a character-level text classifier: `nn.Embedding` of bytes, a dilated
  `nn.Conv1d` stack with `nn.PReLU`, `nn.MaxPool1d`, `nn.CrossEntropyLoss`.
- `gmlp` (~2.7 MB): a gated-MLP token mixer (spatial gating: a `nn.Linear` across tokens), `nn.LayerNorm`,
  `nn.GELU`, mean pooling, `nn.MultiMarginLoss`.
- `convnet` (~6.6 MB): a small image classifier: `nn.Conv2d` residual blocks with `nn.BatchNorm2d` and
  `nn.ReLU6`, `nn.AdaptiveAvgPool2d`, `nn.NLLLoss` on `nn.LogSoftmax`.
- `tagger` (~14.4 MB): a sequence tagger: `nn.Embedding` of 12,000 words, a bidirectional `nn.GRU`, a
  per-token `nn.Linear`, `nn.CrossEntropyLoss` over tokens.
- `skipgram` (~30.7 MB): word2vec's skip-gram with negative sampling: input and output `nn.Embedding` of
  30,000 words, `nn.LogSigmoid`.
- `ctr` (~45.2 MB): a click-through model: five `nn.EmbeddingBag` tables (sum) and a dense `nn.Linear` tower
  with `nn.Dropout`, `nn.BCEWithLogitsLoss`.

    .venv/bin/srift validate --quick --no-plan-quality \\
        --model benchmarks.heldout:charcnn --input benchmarks.heldout:charcnn_input \\
        --model benchmarks.heldout:gmlp --input benchmarks.heldout:gmlp_input \\
        --model benchmarks.heldout:convnet --input benchmarks.heldout:convnet_input
    (and the same for tagger, skipgram and ctr)
"""

from __future__ import annotations

import torch
from torch import nn

_inputs = torch.Generator().manual_seed(4327)

TEXT = 64
BYTES = 256
CLASSES = 10
TOKENS = 16
TOKEN_DIM = 192
WORDS = 12_000
SENTENCE = 12
TAGS = 17
VOCAB = 30_000
NEGATIVES = 5
FIELDS = (80_000, 60_000, 40_000, 30_000, 20_000)
FIELD_DIM = 48


class _CharCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bytes = nn.Embedding(BYTES, 32)
        layers: list[nn.Module] = []
        width = 32
        for dilation, out in ((1, 64), (2, 96), (4, 96), (8, 96)):
            layers += [nn.Conv1d(width, out, 3, padding=dilation, dilation=dilation), nn.PReLU(out)]
            width = out
        layers += [nn.MaxPool1d(4)]
        self.body = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(width * (TEXT // 4), 224), nn.PReLU(), nn.Linear(224, CLASSES))
        self.loss = nn.CrossEntropyLoss()

    def forward(self, text: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        hidden = self.body(self.bytes(text).transpose(1, 2))
        out: torch.Tensor = self.loss(self.head(hidden.flatten(1)), label)
        return out


def charcnn() -> nn.Module:
    return _CharCnn()


def charcnn_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    text = torch.randint(0, BYTES, (batch, TEXT), generator=_inputs)
    return text, torch.randint(0, CLASSES, (batch,), generator=_inputs)


class _GatedBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(TOKEN_DIM)
        self.up = nn.Linear(TOKEN_DIM, 4 * TOKEN_DIM)
        self.act = nn.GELU()
        self.gate_norm = nn.LayerNorm(2 * TOKEN_DIM)
        self.spatial = nn.Linear(TOKENS, TOKENS)
        self.down = nn.Linear(2 * TOKEN_DIM, TOKEN_DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u, v = self.act(self.up(self.norm(x))).chunk(2, dim=-1)
        v = self.spatial(self.gate_norm(v).transpose(1, 2)).transpose(1, 2)
        out: torch.Tensor = x + self.down(u * v)
        return out


class _Gmlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(32, TOKEN_DIM)
        self.blocks = nn.Sequential(*(_GatedBlock() for _ in range(3)))
        self.head = nn.Linear(TOKEN_DIM, CLASSES)
        self.loss = nn.MultiMarginLoss()

    def forward(self, tokens: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        hidden = self.blocks(self.embed(tokens)).mean(dim=1)
        out: torch.Tensor = self.loss(self.head(hidden), label)
        return out


def gmlp() -> nn.Module:
    return _Gmlp()


def gmlp_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randn(batch, TOKENS, 32, generator=_inputs)
    return tokens, torch.randint(0, CLASSES, (batch,), generator=_inputs)


class _Residual(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(width, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU6(),
            nn.Conv2d(width, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
        )
        self.act = nn.ReLU6()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.act(x + self.body(x))
        return out


class _ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 48, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(48),
            nn.ReLU6(),
            _Residual(48),
            nn.Conv2d(48, 96, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(96),
            nn.ReLU6(),
            _Residual(96),
            nn.Conv2d(96, 256, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(256),
            nn.ReLU6(),
            _Residual(256),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(256, CLASSES),
            nn.LogSoftmax(dim=1),
        )
        self.loss = nn.NLLLoss()

    def forward(self, image: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.loss(self.body(image), label)
        return out


def convnet() -> nn.Module:
    return _ConvNet()


def convnet_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    image = torch.randn(batch, 3, 16, 16, generator=_inputs)
    return image, torch.randint(0, CLASSES, (batch,), generator=_inputs)


class _Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.words = nn.Embedding(WORDS, 256)
        self.rnn = nn.GRU(256, 192, batch_first=True, bidirectional=True)
        self.head = nn.Linear(384, TAGS)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, words: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(self.words(words))
        out: torch.Tensor = self.loss(self.head(hidden).flatten(0, 1), tags.flatten())
        return out


def tagger() -> nn.Module:
    return _Tagger()


def tagger_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    words = torch.randint(0, WORDS, (batch, SENTENCE), generator=_inputs)
    return words, torch.randint(0, TAGS, (batch, SENTENCE), generator=_inputs)


class _SkipGram(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.center = nn.Embedding(VOCAB, 128)
        self.context = nn.Embedding(VOCAB, 128)
        self.log_sigmoid = nn.LogSigmoid()

    def forward(self, center: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        c = self.center(center)
        positive = self.log_sigmoid((c * self.context(context)).sum(dim=1))
        negative = self.log_sigmoid(-(self.context(negatives) @ c.unsqueeze(2)).squeeze(2)).sum(dim=1)
        out: torch.Tensor = -(positive + negative).mean()
        return out


def skipgram() -> nn.Module:
    return _SkipGram()


def skipgram_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    center = torch.randint(0, VOCAB, (batch,), generator=_inputs)
    context = torch.randint(0, VOCAB, (batch,), generator=_inputs)
    return center, context, torch.randint(0, VOCAB, (batch, NEGATIVES), generator=_inputs)


class _Ctr(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fields = nn.ModuleList(nn.EmbeddingBag(n, FIELD_DIM, mode="sum") for n in FIELDS)
        self.tower = nn.Sequential(
            nn.Linear(len(FIELDS) * FIELD_DIM + 13, 512),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(512, 256),
            nn.ReLU(),
            nn.Linear(256, 1),
        )
        self.loss = nn.BCEWithLogitsLoss()

    def forward(self, ids: torch.Tensor, dense: torch.Tensor, clicked: torch.Tensor) -> torch.Tensor:
        pooled = [table(ids[:, k]) for k, table in enumerate(self.fields)]
        out: torch.Tensor = self.loss(self.tower(torch.cat([*pooled, dense], dim=1)).squeeze(1), clicked)
        return out


def ctr() -> nn.Module:
    return _Ctr()


def ctr_input(batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ids = torch.stack(
        [torch.randint(0, n, (batch, 3), generator=_inputs) for n in FIELDS], dim=1
    )  # (batch, fields, 3 ids per bag)
    dense = torch.randn(batch, 13, generator=_inputs)
    return ids, dense, (torch.rand(batch, generator=_inputs) < 0.2).float()


MODELS = ("charcnn", "gmlp", "convnet", "tagger", "skipgram", "ctr")
"""The set, in increasing gradient size."""
