"""Small torch.nn models and input factories for profiler tests, benchmarks and DDP validation runs.

Every factory builds its model from a fixed seed, and every input factory takes the batch size and returns
a fresh random batch; nothing is downloaded. Sizes keep a full profile well under two minutes on one CPU
core: `cnn` is compute-bound convolutions on 3×32×32 images, `wide_mlp` carries ~34 MB of gradients
(communication-heavy), `transformer` is a two-layer `nn.TransformerEncoder` over 32 tokens.
`bert_base` has BERT-base's shapes (12 layers, hidden 768, 12 heads, 3072 feed-forward, 30522-word
vocabulary, ≈110 M parameters, 128 tokens) for `srift profile --layers-only`; it is far too slow for a
full CPU profile. `cnn_loader` is a real input pipeline for `cnn` (`srift profile --loader`): images stored
zlib-compressed in files, read, decoded, normalised and flipped per sample by a torch DataLoader.
"""

from __future__ import annotations

import tempfile
import zlib
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

CNN_IMAGE = (3, 32, 32)
CNN_CLASSES = 10
MLP_IN = 1024
MLP_HIDDEN = 2048
TRANSFORMER_VOCAB = 1000
TRANSFORMER_SEQ = 32
TRANSFORMER_DIM = 128
BERT_VOCAB = 30522
"""BERT's WordPiece vocabulary (Devlin et al. 2019); srift.refmodels.nets's BERT-base imports it from here,
the one module of the two that the other may import (profiling sits below refmodels)."""
BERT_HIDDEN = 768
BERT_LAYERS = 12
BERT_HEADS = 12
BERT_FFN = 3072
BERT_POSITIONS = 512
BERT_SEQ = 128

_input_generator = torch.Generator().manual_seed(0)


def _seeded(seed: int) -> None:
    torch.manual_seed(seed)


class SmallCNN(nn.Module):
    """Three conv blocks and a two-layer head, for 3×32×32 images and 10 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, CNN_CLASSES)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.features(x))
        return out


class TinyTransformer(nn.Module):
    """Token embedding, a two-layer `nn.TransformerEncoder`, mean pooling and a linear classifier."""

    def __init__(self, *, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(TRANSFORMER_VOCAB, TRANSFORMER_DIM)
        layer = nn.TransformerEncoderLayer(
            TRANSFORMER_DIM, nhead=4, dim_feedforward=2 * TRANSFORMER_DIM, dropout=0.0, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
        self.classify = nn.Linear(TRANSFORMER_DIM, CNN_CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(self.embed(tokens))
        out: torch.Tensor = self.classify(hidden.mean(dim=1))
        return out


class BertBaseLike(nn.Module):
    """BERT-base's shapes in plain torch.nn (Devlin et al. 2019, Table: L=12, H=768, A=12; 30522 WordPiece
    vocabulary): word, position and segment embeddings, a 12-layer post-norm GELU encoder, a tanh pooler and
    a two-way classifier. Untrained weights from a fixed seed; dropout off so steps are deterministic."""

    def __init__(self) -> None:
        super().__init__()
        self.word = nn.Embedding(BERT_VOCAB, BERT_HIDDEN)
        self.position = nn.Embedding(BERT_POSITIONS, BERT_HIDDEN)
        self.segment = nn.Embedding(2, BERT_HIDDEN)
        self.norm = nn.LayerNorm(BERT_HIDDEN)
        layer = nn.TransformerEncoderLayer(
            BERT_HIDDEN,
            nhead=BERT_HEADS,
            dim_feedforward=BERT_FFN,
            dropout=0.0,
            activation="gelu",
            batch_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=BERT_LAYERS, enable_nested_tensor=False)
        self.pooler = nn.Linear(BERT_HIDDEN, BERT_HIDDEN)
        self.classify = nn.Linear(BERT_HIDDEN, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        hidden = self.word(tokens) + self.position(positions) + self.segment(torch.zeros_like(tokens))
        hidden = self.encoder(self.norm(hidden))
        out: torch.Tensor = self.classify(torch.tanh(self.pooler(hidden[:, 0])))
        return out


class ConditionalNet(nn.Module):
    """A trunk, then one of two branches picked at random per iteration (probability `p_left` for the left).

    The choice uses the model's own seeded generator, so a run is reproducible; the profiler should report
    `exec_prob` < 1 for both branches and 1 for the trunk and the head.
    """

    def __init__(self, *, p_left: float = 0.5, seed: int = 0) -> None:
        super().__init__()
        self.p_left = p_left
        self.trunk = nn.Linear(64, 64)
        self.left = nn.Linear(64, 64)
        self.right = nn.Linear(64, 64)
        self.head = nn.Linear(64, 4)
        self._choice = torch.Generator().manual_seed(seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.trunk(x))
        go_left = bool(torch.rand((), generator=self._choice) < self.p_left)
        h = torch.relu(self.left(h) if go_left else self.right(h))
        out: torch.Tensor = self.head(h)
        return out


class TiedNet(nn.Module):
    """An embedding whose weight is shared with the output projection (tied weights, counted once)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.mix = nn.Linear(32, 32)
        self.out = nn.Linear(32, 100, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.out(torch.tanh(self.mix(self.embed(tokens))))
        return out


def cnn() -> nn.Module:
    """A small CNN for 3×32×32 images (about 0.2 M parameters)."""
    _seeded(1)
    return SmallCNN()


def cnn_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, *CNN_IMAGE, generator=_input_generator)


def wide_mlp() -> nn.Module:
    """A communication-heavy MLP: 1024 → 2048 → 2048 → 1024 → 10, about 8.4 M parameters (≈34 MB fp32)."""
    _seeded(2)
    return nn.Sequential(
        nn.Linear(MLP_IN, MLP_HIDDEN),
        nn.ReLU(),
        nn.Linear(MLP_HIDDEN, MLP_HIDDEN),
        nn.ReLU(),
        nn.Linear(MLP_HIDDEN, MLP_IN),
        nn.ReLU(),
        nn.Linear(MLP_IN, CNN_CLASSES),
    )


def wide_mlp_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, MLP_IN, generator=_input_generator)


def transformer() -> nn.Module:
    """A two-layer transformer encoder classifier over 32 tokens of a 1000-word vocabulary."""
    _seeded(3)
    return TinyTransformer()


def transformer_input(batch: int) -> torch.Tensor:
    return torch.randint(0, TRANSFORMER_VOCAB, (batch, TRANSFORMER_SEQ), generator=_input_generator)


def bert_base() -> nn.Module:
    """A BERT-base-sized encoder classifier (about 110 M parameters, ≈ 440 MB of fp32 gradients)."""
    _seeded(7)
    return BertBaseLike()


def bert_base_input(batch: int) -> torch.Tensor:
    return torch.randint(0, BERT_VOCAB, (batch, BERT_SEQ), generator=_input_generator)


def sequential() -> nn.Module:
    """Six Linear+ReLU blocks in an nn.Sequential; gradients become ready strictly from last to first."""
    _seeded(4)
    blocks: list[nn.Module] = []
    for _ in range(6):
        blocks += [nn.Linear(256, 256), nn.ReLU()]
    return nn.Sequential(*blocks)


def sequential_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 256, generator=_input_generator)


def conditional() -> nn.Module:
    """A model with a random two-way branch (see ConditionalNet)."""
    _seeded(5)
    return ConditionalNet()


def conditional_input(batch: int) -> torch.Tensor:
    return torch.randn(batch, 64, generator=_input_generator)


def tied() -> nn.Module:
    """A model with tied input/output embeddings (see TiedNet)."""
    _seeded(6)
    return TiedNet()


def tied_input(batch: int) -> torch.Tensor:
    return torch.randint(0, 100, (batch, 8), generator=_input_generator)


def cross_entropy_loss(output: torch.Tensor) -> torch.Tensor:
    """A classification loss against fixed pseudo-labels (class = sample index mod the output width)."""
    logits = output.reshape(-1, output.shape[-1])
    labels = torch.arange(logits.shape[0], device=logits.device) % logits.shape[-1]
    return nn.functional.cross_entropy(logits, labels)


class EncodedImages(Dataset[tuple[torch.Tensor, int]]):
    """CIFAR-sized images stored zlib-compressed, one file each: read, decode, normalise, random flip."""

    def __init__(self, root: Path, count: int) -> None:
        self.files = [root / f"{i:06d}.z" for i in range(count)]
        self.flip = torch.Generator().manual_seed(1)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        raw = zlib.decompress(self.files[index].read_bytes())
        image = torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).reshape(CNN_IMAGE).copy()).float()
        image = (image / 255.0 - 0.5) / 0.25
        if torch.rand(1, generator=self.flip).item() < 0.5:
            image = image.flip(-1)
        return image, index % CNN_CLASSES


_loader_roots: dict[int, Path] = {}


def encoded_images(count: int) -> Path:
    """A directory of `count` compressed images (smooth noise, so they compress as photos roughly do)."""
    root = _loader_roots.get(count)
    if root is not None and len(list(root.glob("*.z"))) == count:
        return root
    root = Path(tempfile.mkdtemp(prefix="srift-images-"))
    rng = np.random.default_rng(0)
    for i in range(count):
        base = rng.integers(0, 256, size=(CNN_IMAGE[0], 8, 8), dtype=np.uint8)
        image = np.repeat(np.repeat(base, 4, axis=1), 4, axis=2)
        image = (image + rng.integers(0, 16, size=CNN_IMAGE, dtype=np.uint8)).astype(np.uint8)
        (root / f"{i:06d}.z").write_bytes(zlib.compress(image.tobytes(), 6))
    _loader_roots[count] = root
    return root


def cnn_loader(
    *, samples: int = 2048, batch: int = 32, workers: int = 0
) -> DataLoader[tuple[torch.Tensor, int]]:
    """A DataLoader over `samples` encoded images for `cnn` (shuffled, `workers` worker processes)."""
    data = EncodedImages(encoded_images(samples), samples)
    return DataLoader(
        data, batch_size=batch, shuffle=True, num_workers=workers, generator=torch.Generator().manual_seed(0)
    )


def cnn_loader_workers() -> DataLoader[tuple[torch.Tensor, int]]:
    """`cnn_loader` with two worker processes."""
    return cnn_loader(workers=2)
