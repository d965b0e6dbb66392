"""Encoder-decoder blocks (the 2017 Transformer, T5, Whisper): for the encoder-decoder chapter.

The encoder reads the whole source at once, so its self-attention is bidirectional (only padding is
masked). The decoder block has three sublayers: causal self-attention over the target so far,
cross-attention in which target queries look at the encoder's output ("memory"), and the FFN.

    memory = EncoderBlock(cfg)(src, src_mask)          # (B, S, d)
    out    = DecoderBlock(cfg)(tgt, memory, src_mask)  # (B, T, d)

Both follow config.block: "pre" (norm before each sublayer) or "post" (2017: norm after the add).
"""
from __future__ import annotations

import torch
from torch import nn

from llmlab.attention import Attention, attention_weights, causal_mask, padding_mask
from llmlab.ffn import make_ffn
from llmlab.hooks import HookPoint
from llmlab.norms import make_norm


def _sublayer(x, norm, fn, layout):
    """Residual add with the norm before ("pre") or after ("post") it."""
    return x + fn(norm(x)) if layout != "post" else norm(x + fn(x))


class CrossAttention(nn.Module):
    """Queries from the decoder stream x (B, T, d), keys and values from the encoder memory (B, S, d)."""

    def __init__(self, config):
        super().__init__()
        c = config
        self.n_heads, self.head_dim = c.n_heads, c.head_dim
        self.q_proj = nn.Linear(c.d_model, c.n_heads * c.head_dim, bias=c.qkv_bias)
        self.k_proj = nn.Linear(c.d_model, c.n_heads * c.head_dim, bias=c.qkv_bias)
        self.v_proj = nn.Linear(c.d_model, c.n_heads * c.head_dim, bias=c.qkv_bias)
        self.o_proj = nn.Linear(c.n_heads * c.head_dim, c.d_model, bias=c.out_bias)
        self.hook_pattern, self.hook_z = HookPoint("B H T S"), HookPoint("B T H hd")

    def forward(self, x: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        S = memory.shape[1]
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)       # (B, H, T, hd)
        k = self.k_proj(memory).view(B, S, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, S, hd)
        v = self.v_proj(memory).view(B, S, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, S, hd)
        weights = self.hook_pattern(attention_weights(q, k, mask))                       # (B, H, T, S)
        z = self.hook_z(torch.matmul(weights, v).transpose(1, 2))                        # (B, T, H, hd)
        return self.o_proj(z.reshape(B, T, self.n_heads * self.head_dim))                # (B, T, d)


class EncoderBlock(nn.Module):
    """Bidirectional self-attention + FFN. src_mask (B, S): 1 = real token, 0 = padding."""

    def __init__(self, config):
        super().__init__()
        self.layout = config.block
        self.attn_norm, self.attn = make_norm(config), Attention(config)
        self.mlp_norm, self.mlp = make_norm(config), make_ffn(config)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = padding_mask(src_mask) if src_mask is not None else None  # (B, 1, 1, S): no causal part
        x = _sublayer(x, self.attn_norm, lambda h: self.attn(h, mask=mask, attn_impl="eager"), self.layout)
        return _sublayer(x, self.mlp_norm, self.mlp, self.layout)


class DecoderBlock(nn.Module):
    """Causal self-attention, cross-attention to the encoder memory, FFN."""

    def __init__(self, config):
        super().__init__()
        self.layout = config.block
        self.attn_norm, self.attn = make_norm(config), Attention(config)
        self.cross_norm, self.cross_attn = make_norm(config), CrossAttention(config)
        self.mlp_norm, self.mlp = make_norm(config), make_ffn(config)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        causal = causal_mask(x.shape[1], device=x.device)                           # (T, T)
        cross = padding_mask(src_mask) if src_mask is not None else None            # (B, 1, 1, S)
        x = _sublayer(x, self.attn_norm, lambda h: self.attn(h, mask=causal, attn_impl="eager"), self.layout)
        x = _sublayer(x, self.cross_norm, lambda h: self.cross_attn(h, memory, cross), self.layout)
        return _sublayer(x, self.mlp_norm, self.mlp, self.layout)
