"""Llama-style decoders in plain torch.nn, from Meta's published configurations (structure only, no weights).

- Llama 3.2 1B (meta-llama/Llama-3.2-1B config.json): hidden 2,048, 16 layers, 32 attention heads, 8
  key/value heads (grouped-query attention, head dimension 64), SwiGLU feed-forward of 8,192, vocabulary
  128,256, RMSNorm (ε 1e-5), rotary embeddings (θ 500,000), input embedding tied to the output:
  1,235,814,400 parameters.
- Llama 3.1 8B (meta-llama/Llama-3.1-8B config.json): hidden 4,096, 32 layers, 32 heads, 8 key/value
  heads (head dimension 128), feed-forward 14,336, vocabulary 128,256, RMSNorm (ε 1e-5), rotary θ 500,000,
  untied output: 8,030,261,248 parameters.

Both train as causal language models on `LLAMA_SEQ`-token sequences (the loss of
`srift.refmodels.nets.LanguageModelTrain`). Build them on the meta device or under fake tensors to count
them: `with torch.device("meta"): llama_8b()` allocates nothing (the 8 B model's fp32 weights are 32 GB).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from srift.refmodels.nets import LanguageModelTrain

LLAMA_VOCAB = 128_256
LLAMA_SEQ = 2048
"""Training sequence length of the reference runs (Llama 3's pre-training started at 8,192; 2,048 is a
common fine-tuning length that fits the catalog's 24 GB GPUs once sharded and checkpointed)."""
ROPE_THETA = 500_000.0
NORM_EPS = 1e-5

_inputs = torch.Generator().manual_seed(0)


@dataclass(frozen=True, slots=True)
class LlamaConfig:
    """The published hyper-parameters a decoder is built from."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int = LLAMA_VOCAB
    tied: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


LLAMA_3_2_1B = LlamaConfig(hidden=2048, layers=16, heads=32, kv_heads=8, ffn=8192, tied=True)
LLAMA_3_1_8B = LlamaConfig(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336)


class RMSNorm(nn.Module):
    """x / rms(x) · weight (Zhang and Sennrich 2019), computed in fp32 as Llama's reference code does."""

    def __init__(self, dim: int, eps: float = NORM_EPS) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        out: torch.Tensor = y.type_as(x) * self.weight
        return out


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def rope_tables(seq: int, head_dim: int, theta: float = ROPE_THETA) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles (Su et al. 2021), shape (seq, head_dim)."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


class Attention(nn.Module):
    """Grouped-query attention: q with `heads` heads, k and v with `kv_heads`, rotary positions, causal."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = cfg.heads, cfg.kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden, cfg.heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        repeat = self.heads // self.kv_heads
        k = k.repeat_interleave(repeat, dim=1)
        v = v.repeat_interleave(repeat, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out: torch.Tensor = self.o_proj(y.transpose(1, 2).reshape(b, s, -1))
        return out


class Mlp(nn.Module):
    """SwiGLU feed-forward (Shazeer 2020): down(silu(gate(x)) · up(x))."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.up_proj = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.down_proj = nn.Linear(cfg.ffn, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return out


class DecoderLayer(nn.Module):
    """Pre-norm block: x + attention(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden)
        self.mlp = Mlp(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        out: torch.Tensor = x + self.mlp(self.post_attention_layernorm(x))
        return out


class Llama(nn.Module):
    """Token embedding, `layers` decoder layers, final RMSNorm, output projection (tied or not)."""

    def __init__(self, cfg: LlamaConfig, *, seq: int = LLAMA_SEQ) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if cfg.tied:
            self.lm_head.weight = self.embed_tokens.weight
        cos, sin = rope_tables(seq, cfg.head_dim)
        self.cos: torch.Tensor
        self.sin: torch.Tensor
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        s = tokens.shape[1]
        cos, sin = self.cos[:s], self.sin[:s]
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits: torch.Tensor = self.lm_head(self.norm(x))
        return logits


def llama_1b() -> nn.Module:
    """Llama 3.2 1B with its language-model loss."""
    return LanguageModelTrain(Llama(LLAMA_3_2_1B))


def llama_8b() -> nn.Module:
    """Llama 3.1 8B with its language-model loss."""
    return LanguageModelTrain(Llama(LLAMA_3_1_8B))


def llama_input(batch: int) -> torch.Tensor:
    """`batch` random sequences of `LLAMA_SEQ` + 1 tokens: each position predicts the next."""
    return torch.randint(0, LLAMA_VOCAB, (batch, LLAMA_SEQ + 1), generator=_inputs)
