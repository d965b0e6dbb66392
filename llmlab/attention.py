"""Attention: every token mixes in information from the tokens it is allowed to see.

For one head: scores = q @ k^T * scale, masked, softmaxed into weights that sum to 1 over the
keys, then out = weights @ v. A multi-head layer runs n_heads of these side by side on slices of
the model width and concatenates the results.

>>> causal_mask(3).int()            # row = query position, column = key position, 1 = may attend
tensor([[1, 0, 0],
        [1, 1, 0],
        [1, 1, 1]], dtype=torch.int32)
>>> sliding_window_mask(4, window=2).int()   # the token itself and the one before it
tensor([[1, 0, 0, 0],
        [1, 1, 0, 0],
        [0, 1, 1, 0],
        [0, 0, 1, 1]], dtype=torch.int32)
>>> softmax(torch.tensor([1.0, 2.0, 3.0]))
tensor([0.0900, 0.2447, 0.6652])
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from llmlab.hooks import HookPoint
from llmlab.norms import RMSNorm
from llmlab.positions import apply_rope


# ---------------------------------------------------------------- the pieces, as plain functions

def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x) / sum(exp(x)); subtracting the max first changes nothing mathematically but avoids overflow."""
    x = x - x.amax(dim=dim, keepdim=True)
    e = x.exp()
    return e / e.sum(dim=dim, keepdim=True)


def causal_mask(T: int, device=None, start: int = 0) -> torch.Tensor:
    """(T, T) bool, True where query i may attend to key j, i.e. j <= i (no peeking at the future).

    After a KV cache holds `start` positions, the T new queries are positions start..start+T-1 and
    the keys 0..start+T-1: the mask is (T, start + T).
    """
    i = torch.arange(start, start + T, device=device)[:, None]  # (T, 1) query positions
    j = torch.arange(start + T, device=device)[None, :]         # (1, T_k) key positions
    return j <= i


def sliding_window_mask(T: int, window: int, device=None, start: int = 0) -> torch.Tensor:
    """(T, T) bool: causal, and at most `window` keys back counting the token itself (i - window < j <= i).

    With start > 0 (a KV cache), (T, start + T) as in causal_mask.
    """
    i = torch.arange(start, start + T, device=device)[:, None]
    j = torch.arange(start + T, device=device)[None, :]
    return (j <= i) & (j > i - window)


def padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, T_k) with 1 for real tokens and 0 for padding -> (B, 1, 1, T_k) bool, broadcastable over heads and queries."""
    return attention_mask.bool()[:, None, None, :]


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, n_kv_heads, T, hd) -> (B, n_kv_heads * n_rep, T, hd): each key/value head serves n_rep query heads (GQA)."""
    if n_rep == 1:
        return x
    B, n_kv, T, hd = x.shape
    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd), no copy yet
    return x.reshape(B, n_kv * n_rep, T, hd)         # (B, n_heads, T, hd)


def attention_weights(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None = None, scale: float | None = None,
                      bias: torch.Tensor | None = None, softcap: float | None = None) -> torch.Tensor:
    """softmax(q @ k^T * scale + bias, masked): (B, H, T_q, hd), (B, H, T_k, hd) -> (B, H, T_q, T_k).

    Masked scores are set to the most negative float rather than -inf, so that a row with nothing to
    attend to gives uniform weights instead of NaN. The softmax runs in float32.
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale  # (B, H, T_q, T_k)
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return softmax(scores.float(), dim=-1).to(q.dtype)


def scaled_dot_product_attention(q, k, v, mask=None, scale=None, bias=None, softcap=None):
    """The eager attention of one layer: returns (out (B, H, T_q, hd), weights (B, H, T_q, T_k))."""
    weights = attention_weights(q, k, mask, scale, bias, softcap)  # (B, H, T_q, T_k)
    return torch.matmul(weights, v), weights                       # (B, H, T_q, hd)


def _sdpa_supports_gqa() -> bool:
    try:
        x = torch.zeros(1, 2, 1, 2)
        F.scaled_dot_product_attention(x, x[:, :1], x[:, :1], enable_gqa=True)
        return True
    except TypeError:  # torch < 2.5
        return False


SDPA_GQA = _sdpa_supports_gqa()


# ---------------------------------------------------------------- the layer

class Attention(nn.Module):
    """Multi-head self-attention with MHA / GQA / MQA, optional QK-norm, RoPE, KV cache, two code paths.

    attn_impl="eager": the functions above, step by step; the weights pass through hook_pattern.
    attn_impl="sdpa":  torch's fused scaled_dot_product_attention; no weights, much faster.
    """

    def __init__(self, config, layer_idx: int = 0):
        super().__init__()
        c = config
        self.layer_idx = layer_idx
        self.n_heads, self.n_kv_heads, self.head_dim = c.n_heads, c.n_kv_heads, c.head_dim
        self.n_rep = c.n_heads // c.n_kv_heads
        self.sliding_window = c.sliding_window if c.layer_types[layer_idx] == "sliding" else None
        # Gemma scales by query_pre_attn_scalar**-0.5, which need not equal head_dim**-0.5.
        self.scale = (c.query_pre_attn_scalar or c.head_dim) ** -0.5
        self.softcap = c.attn_logit_softcap
        q_size, kv_size = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        self.fused = c.fused_qkv  # one qkv_proj (GPT-2, Phi-3, or stacked by llmlab.fusing)
        if self.fused:
            self.qkv_proj = nn.Linear(c.d_model, q_size + 2 * kv_size, bias=c.qkv_bias)
        else:
            self.q_proj = nn.Linear(c.d_model, q_size, bias=c.qkv_bias)
            self.k_proj = nn.Linear(c.d_model, kv_size, bias=c.qkv_bias)
            self.v_proj = nn.Linear(c.d_model, kv_size, bias=c.qkv_bias)
        self.o_proj = nn.Linear(q_size, c.d_model, bias=c.out_bias)
        if c.qk_norm:
            self.q_norm = RMSNorm(c.head_dim, c.norm_eps, c.norm_unit_offset)
            self.k_norm = RMSNorm(c.head_dim, c.norm_eps, c.norm_unit_offset)
        self.qk_norm = c.qk_norm
        self.hook_q, self.hook_k, self.hook_v = HookPoint("B H T hd"), HookPoint("B K T hd"), HookPoint("B K T hd")
        self.hook_pattern, self.hook_z = HookPoint("B H T S"), HookPoint("B T H hd")

    def project_qkv(self, x: torch.Tensor):
        """x (B, T, d) -> q (B, T, n_heads*hd), k and v (B, T, n_kv_heads*hd)."""
        if self.fused:
            kv_size = self.n_kv_heads * self.head_dim
            return self.qkv_proj(x).split([self.n_heads * self.head_dim, kv_size, kv_size], dim=-1)
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)

    def forward(self, x: torch.Tensor, rope: tuple | None = None, mask: torch.Tensor | None = None,
                bias: torch.Tensor | None = None, cache=None, attn_impl: str = "sdpa") -> torch.Tensor:
        """x (B, T, d) -> (B, T, d).

        rope: (cos, sin) for the T new positions, or None. mask: bool, True = may attend, broadcastable
        to (B, n_heads, T, T_k), or None for "every key" (one new token, no padding). bias: an additive
        score bias (ALiBi). cache: a KV cache; the new keys and values are appended and all are used.
        """
        B, T, _ = x.shape
        q, k, v = self.project_qkv(x)
        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)     # (B, nh, T, hd)
        k = k.view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, nkv, T, hd)
        v = v.view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, nkv, T, hd)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:
            cos, sin = rope
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v)                     # (B, nkv, T_k, hd), past + new

        if attn_impl == "eager" or self.softcap is not None:  # sdpa cannot soft-cap scores
            weights = attention_weights(q, repeat_kv(k, self.n_rep), mask, self.scale, bias, self.softcap)
            weights = self.hook_pattern(weights)                          # (B, nh, T, T_k)
            z = torch.matmul(weights, repeat_kv(v, self.n_rep))           # (B, nh, T, hd)
        elif attn_impl == "sdpa":
            if bias is not None:  # sdpa takes one float mask: the bias, with -inf where masked
                mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
            if SDPA_GQA:
                z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale,
                                                   enable_gqa=self.n_rep > 1)  # (B, nh, T, hd)
            else:
                z = F.scaled_dot_product_attention(q, repeat_kv(k, self.n_rep), repeat_kv(v, self.n_rep),
                                                   attn_mask=mask, scale=self.scale)
        else:
            raise ValueError(f"attn_impl={attn_impl!r} is not known; use 'eager' or 'sdpa'.")
        z = self.hook_z(z.transpose(1, 2))                                # (B, T, nh, hd)
        return self.o_proj(z.reshape(B, T, self.n_heads * self.head_dim))  # (B, T, d)
