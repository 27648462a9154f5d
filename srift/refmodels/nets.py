"""Reference models in plain torch.nn, built from their published architectures (no weights downloaded).

- ResNet-50 (He et al. 2016, "Deep Residual Learning", Table 1), in torchvision's v1.5 form (stride 2 in
  the 3×3 convolution of a downsampling bottleneck, as NVIDIA's DeepLearningExamples train it): 25,557,032
  parameters.
- BERT-base (Devlin et al. 2019: L=12, H=768, A=12, feed-forward 3072, WordPiece vocabulary 30,522, 512
  positions, 2 segment types, GELU, dropout 0.1) with the SQuAD span head (two logits per token), trained
  as DeepLearningExamples' SQuAD fine-tuning does at sequence length 384: 108,893,186 parameters.
- GPT-2 small (Radford et al. 2019 and OpenAI's released hyper-parameters: 12 layers, d=768, 12 heads,
  1,024 positions, vocabulary 50,257, pre-LayerNorm, GELU, dropout 0.1, output projection tied to the token
  embedding): 124,439,808 parameters; language-model loss over 1,024 tokens.
- GPT-2 XL: the same architecture at 48 layers, d=1,600, 25 heads (OpenAI's released gpt2-xl
  hyper-parameters): 1,557,611,200 parameters.
- ViT-B/16 (Dosovitskiy et al. 2021, Table 1: 12 layers, hidden 768, MLP 3072, 12 heads, 16×16 patches of
  224×224 images, class token, 1,000-class head), as torchvision's `vit_b_16` (dropout 0): 86,567,656
  parameters.

Each `*_train` module takes one input batch and returns the scalar training loss, so the profiler's default
loss (the mean of the output) backpropagates exactly the published training objective. Input factories
return seeded random batches of the published shapes.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from srift.profiling.testmodels import BERT_VOCAB

IMAGE = (3, 224, 224)
IMAGENET_CLASSES = 1000
BERT_SEQ = 384
GPT2_VOCAB = 50257
GPT2_SEQ = 1024

_inputs = torch.Generator().manual_seed(0)


class WithLoss(nn.Module):
    """A reference network as `net` (its parameters named `net.…`) and, in a subclass's forward, the loss
    it trains with: the `*_train` modules return the scalar loss of one input batch."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net


# --- ResNet-50 -----------------------------------------------------------------------------------------


class Bottleneck(nn.Module):
    """1×1 reduce, 3×3 (carrying the stride), 1×1 expand ×4, each with BatchNorm; identity or projection."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        out: torch.Tensor = self.relu(y + identity)
        return out


class ResNet50(nn.Module):
    """Stem (7×7/2 conv, 3×3/2 max pool), stages of 3, 4, 6, 3 bottlenecks, global pool, 1000-way linear."""

    def __init__(self, classes: int = IMAGENET_CLASSES) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages = []
        inplanes = 64
        for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            layers = [Bottleneck(inplanes, planes, stride)]
            inplanes = planes * Bottleneck.expansion
            layers += [Bottleneck(inplanes, planes) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512 * Bottleneck.expansion, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        out: torch.Tensor = self.fc(torch.flatten(self.avgpool(x), 1))
        return out


class ImageClassifierTrain(WithLoss):
    """An image classifier and its cross-entropy loss: forward(images, labels) → loss."""

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.net(images), labels)


def resnet50() -> nn.Module:
    """ResNet-50 v1.5 with its ImageNet training loss."""
    torch.manual_seed(50)
    return ImageClassifierTrain(ResNet50())


def image_input(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`batch` random 3×224×224 images and ImageNet labels."""
    images = torch.randn(batch, *IMAGE, generator=_inputs)
    labels = torch.randint(0, IMAGENET_CLASSES, (batch,), generator=_inputs)
    return images, labels


# --- BERT-base ------------------------------------------------------------------------------------------


class BertSelfAttention(nn.Module):
    """Multi-head self-attention as BERT computes it: scores, softmax, dropout, weighted sum."""

    def __init__(self, hidden: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(dropout)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        return x.view(b, s, self.heads, h // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1]) + mask_bias
        probs = self.dropout(torch.softmax(scores, dim=-1))
        context = torch.matmul(probs, v).transpose(1, 2)
        return context.reshape(x.shape)


class BertLayer(nn.Module):
    """Post-LayerNorm transformer encoder layer (attention, output projection, GELU feed-forward)."""

    def __init__(self, hidden: int = 768, heads: int = 12, ffn: int = 3072, dropout: float = 0.1) -> None:
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads, dropout)
        self.attention_out = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, ffn)
        self.output = nn.Linear(ffn, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + self.dropout(self.attention_out(self.attention(x, mask_bias))))
        out: torch.Tensor = self.output_norm(x + self.dropout(self.output(F.gelu(self.intermediate(x)))))
        return out


class BertForQuestionAnswering(nn.Module):
    """BERT-base encoder (word, position and segment embeddings, 12 layers) with the SQuAD span head."""

    def __init__(
        self, *, vocab: int = BERT_VOCAB, hidden: int = 768, layers: int = 12, positions: int = 512
    ) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(positions, hidden)
        self.token_type_embeddings = nn.Embedding(2, hidden)
        self.embedding_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.layers = nn.ModuleList(BertLayer(hidden) for _ in range(layers))
        self.qa_outputs = nn.Linear(hidden, 2)
        for m in self.modules():
            if isinstance(m, nn.Linear | nn.Embedding):
                nn.init.normal_(m.weight, std=0.02)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)[None]
            + self.token_type_embeddings(token_type_ids)
        )
        x = self.dropout(self.embedding_norm(x))
        mask_bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        logits: torch.Tensor = self.qa_outputs(x)
        return logits


class SquadTrain(WithLoss):
    """BERT span prediction and its loss: the mean of start and end cross-entropies."""

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        start_positions: torch.Tensor,
        end_positions: torch.Tensor,
    ) -> torch.Tensor:
        logits = self.net(input_ids, token_type_ids, attention_mask)
        start, end = logits.float().unbind(dim=-1)
        return (F.cross_entropy(start, start_positions) + F.cross_entropy(end, end_positions)) / 2


def bert_base() -> nn.Module:
    """BERT-base with the SQuAD span head and its fine-tuning loss."""
    torch.manual_seed(110)
    return SquadTrain(BertForQuestionAnswering())


def bert_input(batch: int) -> dict[str, torch.Tensor]:
    """`batch` random SQuAD examples of 384 tokens (question segment 64 tokens, all tokens attended)."""
    ids = torch.randint(0, BERT_VOCAB, (batch, BERT_SEQ), generator=_inputs)
    types = torch.zeros(batch, BERT_SEQ, dtype=torch.long)
    types[:, 64:] = 1
    return {
        "input_ids": ids,
        "token_type_ids": types,
        "attention_mask": torch.ones(batch, BERT_SEQ, dtype=torch.long),
        "start_positions": torch.randint(0, BERT_SEQ, (batch,), generator=_inputs),
        "end_positions": torch.randint(0, BERT_SEQ, (batch,), generator=_inputs),
    }


# --- GPT-2 small ----------------------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    """GPT-2 attention: one fused q/k/v projection, causal scaled dot-product attention, output projection."""

    def __init__(self, hidden: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = (
            t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in self.c_attn(x).split(h, dim=2)
        )
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
        )
        out: torch.Tensor = self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(b, s, h)))
        return out


class Gpt2Block(nn.Module):
    """Pre-LayerNorm block: x + attention(LN(x)), then x + MLP(LN(x)) with a 4× GELU feed-forward."""

    def __init__(self, hidden: int = 768, heads: int = 12, dropout: float = 0.1) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = CausalSelfAttention(hidden, heads, dropout)
        self.ln_2 = nn.LayerNorm(hidden)
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.c_proj = nn.Linear(4 * hidden, hidden)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        out: torch.Tensor = x + self.dropout(self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))
        return out


class Gpt2(nn.Module):
    """GPT-2 small: token and position embeddings, 12 blocks, final LayerNorm, tied output projection."""

    def __init__(
        self,
        *,
        vocab: int = GPT2_VOCAB,
        positions: int = GPT2_SEQ,
        hidden: int = 768,
        layers: int = 12,
        heads: int = 12,
    ) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(positions, hidden)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList(Gpt2Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        for m in self.modules():
            if isinstance(m, nn.Linear | nn.Embedding):
                nn.init.normal_(m.weight, std=0.02)
        self.lm_head.weight = self.wte.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.drop(self.wte(tokens) + self.wpe(positions)[None])
        for block in self.h:
            x = block(x)
        logits: torch.Tensor = self.lm_head(self.ln_f(x))
        return logits


class LanguageModelTrain(WithLoss):
    """Next-token cross-entropy of a causal language model over the whole sequence."""

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        logits = self.net(tokens[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())


def gpt2_small() -> nn.Module:
    """GPT-2 small (124 M parameters) with its language-model loss."""
    torch.manual_seed(124)
    return LanguageModelTrain(Gpt2())


def gpt2_xl() -> nn.Module:
    """GPT-2 XL (1,557,611,200 parameters: 48 layers, d = 1,600, 25 heads, OpenAI's released gpt2-xl
    hyper-parameters; the paper's Table 2 lists it as 1,542 M) with its language-model loss."""
    torch.manual_seed(1558)
    return LanguageModelTrain(Gpt2(hidden=1600, layers=48, heads=25))


def gpt2_input(batch: int) -> torch.Tensor:
    """`batch` random sequences of 1,025 tokens: 1,024 inputs, each predicting the next."""
    return torch.randint(0, GPT2_VOCAB, (batch, GPT2_SEQ + 1), generator=_inputs)


# --- ViT-B/16 -------------------------------------------------------------------------------------------


class VitBlock(nn.Module):
    """Pre-LayerNorm encoder block: multi-head self-attention, then an MLP of 3072 with GELU."""

    def __init__(self, hidden: int = 768, heads: int = 12, mlp: int = 3072) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-6)
        self.mlp_in = nn.Linear(hidden, mlp)
        self.mlp_out = nn.Linear(mlp, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        x = x + self.self_attention(y, y, y, need_weights=False)[0]
        out: torch.Tensor = x + self.mlp_out(F.gelu(self.mlp_in(self.ln_2(x))))
        return out


class VisionTransformer(nn.Module):
    """ViT-B/16: 16×16 patch embedding (a strided convolution), class token, learned positions, 12 blocks."""

    def __init__(
        self, *, image: int = 224, patch: int = 16, hidden: int = 768, layers: int = 12, classes: int = 1000
    ) -> None:
        super().__init__()
        self.conv_proj = nn.Conv2d(3, hidden, patch, stride=patch)
        tokens = (image // patch) ** 2 + 1
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden))
        self.pos_embedding = nn.Parameter(torch.empty(1, tokens, hidden).normal_(std=0.02))
        self.layers = nn.ModuleList(VitBlock(hidden) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden, eps=1e-6)
        self.head = nn.Linear(hidden, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.conv_proj(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embedding
        for layer in self.layers:
            x = layer(x)
        out: torch.Tensor = self.head(self.ln(x)[:, 0])
        return out


def vit_b16() -> nn.Module:
    """ViT-B/16 with its ImageNet training loss."""
    torch.manual_seed(16)
    return ImageClassifierTrain(VisionTransformer())
