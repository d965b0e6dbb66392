"""Learner-style solutions, right and wrong, for the build-it exercises of chapters 5 and 8
(gqa_attention, llama_block). Written the way a learner would, independently of llmlab's code and
of the checker's own variants. tests/test_exercises.py runs them with every other exercise."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def gqa_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin, *, tile=False, scale=True, rope=True,
                  causal=True):
    B, T, d = x.shape
    hd = w_q.shape[1] // n_heads
    q = (x @ w_q).view(B, T, n_heads, hd).transpose(1, 2)            # (B, H, T, hd)
    k = (x @ w_k).view(B, T, n_kv_heads, hd).transpose(1, 2)         # (B, Hkv, T, hd)
    v = (x @ w_v).view(B, T, n_kv_heads, hd).transpose(1, 2)
    if rope:
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    group = n_heads // n_kv_heads
    if tile:
        k, v = torch.cat([k] * group, dim=1), torch.cat([v] * group, dim=1)
    else:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(hd)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    z = scores.softmax(-1) @ v                                        # (B, H, T, hd)
    return z.transpose(1, 2).reshape(B, T, n_heads * hd) @ w_o


def gqa_tiled(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin):
    return gqa_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin, tile=True)


def gqa_no_scale(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin):
    return gqa_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin, scale=False)


def gqa_no_rope(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin):
    return gqa_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin, rope=False)


def gqa_no_mask(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin):
    return gqa_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin, causal=False)


def gqa_no_repeat(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin):
    """Forgets to repeat the KV heads: q @ k^T fails to broadcast when n_kv_heads != n_heads."""
    B, T, d = x.shape
    hd = w_q.shape[1] // n_heads
    q = (x @ w_q).view(B, T, n_heads, hd).transpose(1, 2)
    k = (x @ w_k).view(B, T, n_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).view(B, T, n_kv_heads, hd).transpose(1, 2)
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
    scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1) @ w_o


def gqa_interleaved_rope(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin):
    B, T, d = x.shape
    hd = w_q.shape[1] // n_heads

    def turn(t):   # rotates (0, 1), (2, 3), ... : the GPT-J / Meta-original layout
        c, s = cos[:, : hd // 2].repeat_interleave(2, -1), sin[:, : hd // 2].repeat_interleave(2, -1)
        r = torch.stack([-t[..., 1::2], t[..., 0::2]], dim=-1).flatten(-2)
        return t * c + r * s

    q = turn((x @ w_q).view(B, T, n_heads, hd).transpose(1, 2))
    k = turn((x @ w_k).view(B, T, n_kv_heads, hd).transpose(1, 2))
    v = (x @ w_v).view(B, T, n_kv_heads, hd).transpose(1, 2)
    k, v = k.repeat_interleave(n_heads // n_kv_heads, 1), v.repeat_interleave(n_heads // n_kv_heads, 1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
    scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1) @ w_o


def rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def swiglu(x, w):
    return (F.silu(x @ w["gate"]) * (x @ w["up"])) @ w["down"]


def llama_block(x, w, n_heads, n_kv_heads, cos, sin, eps):
    h = x + gqa_attention(rms(x, w["attn_norm"], eps), w["q"], w["k"], w["v"], w["o"], n_heads, n_kv_heads, cos, sin)
    return h + swiglu(rms(h, w["mlp_norm"], eps), w)


def llama_block_post_norm(x, w, n_heads, n_kv_heads, cos, sin, eps):
    h = rms(x + gqa_attention(x, w["q"], w["k"], w["v"], w["o"], n_heads, n_kv_heads, cos, sin), w["attn_norm"], eps)
    return rms(h + swiglu(h, w), w["mlp_norm"], eps)


def llama_block_ffn_reads_x(x, w, n_heads, n_kv_heads, cos, sin, eps):
    h = x + gqa_attention(rms(x, w["attn_norm"], eps), w["q"], w["k"], w["v"], w["o"], n_heads, n_kv_heads, cos, sin)
    return h + swiglu(rms(x, w["mlp_norm"], eps), w)


def llama_block_no_norm_weight(x, w, n_heads, n_kv_heads, cos, sin, eps):
    ones = torch.ones(x.shape[-1])
    h = x + gqa_attention(rms(x, ones, eps), w["q"], w["k"], w["v"], w["o"], n_heads, n_kv_heads, cos, sin)
    return h + swiglu(rms(h, ones, eps), w)


RIGHT = {"gqa_attention": gqa_attention, "llama_block": llama_block}

# (exercise, wrong solution, words the feedback must contain)
WRONG = [
    ("gqa_attention", gqa_tiled, ["wrong order", "repeat_interleave"]),
    ("gqa_attention", gqa_no_scale, ["not scaled", "sqrt(head_dim)"]),
    ("gqa_attention", gqa_no_rope, ["RoPE is missing"]),
    ("gqa_attention", gqa_interleaved_rope, ["wrong layout", "split-halves"]),
    ("gqa_attention", gqa_no_mask, ["causal mask is missing"]),
    ("gqa_attention", gqa_no_repeat, ["Repeat each KV head"]),
    ("llama_block", llama_block_post_norm, ["post-norm"]),
    ("llama_block", llama_block_ffn_reads_x, ["AFTER attention"]),
    ("llama_block", llama_block_no_norm_weight, ["RMSNorm weights are missing"]),
]
