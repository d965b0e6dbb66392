"""The exercise checks: every registered exercise accepts a correct learner solution (written here
the way a learner would, independently of llmlab's reference), rejects typical wrong solutions with
a message that names the mistake, and turns broken code into feedback instead of a crash."""
from __future__ import annotations

import json
import math
import threading

import pytest
import torch
import torch.nn.functional as F

from llmlab.exercises import EXERCISES, CheckResult, check

# ------------------------------------------------------------------ learner-style solutions, right and wrong
# Ch. 1


def greedy_next_token(logits):
    return logits[:, -1, :].argmax(dim=-1)


def greedy_first_position(logits):
    return logits[:, 0, :].argmax(dim=-1)


def greedy_every_position(logits):
    return logits.argmax(dim=-1)


# Ch. 2

def pair_counts(ids):
    counts = {}
    for a, b in zip(ids, ids[1:]):
        counts[(a, b)] = counts.get((a, b), 0) + 1
    return counts


def pair_counts_skip_last(ids):
    counts = {}
    for i in range(len(ids) - 2):
        counts[(ids[i], ids[i + 1])] = counts.get((ids[i], ids[i + 1]), 0) + 1
    return counts


def pair_counts_set(ids):
    return {pair: 1 for pair in zip(ids, ids[1:])}


def bpe_merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i < len(ids) - 1 and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def bpe_merge_step_one(ids, pair, new_id):
    out = []
    for i in range(len(ids)):
        out.append(new_id if i < len(ids) - 1 and (ids[i], ids[i + 1]) == tuple(pair) else ids[i])
    return out


def bpe_merge_drop_last(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


# Ch. 3

def one_hot_embedding(ids, table):
    return F.one_hot(ids, num_classes=table.shape[0]).float() @ table


def one_hot_only(ids, table):
    return F.one_hot(ids, num_classes=table.shape[0]).float()


def one_hot_too_few_classes(ids, table):
    return F.one_hot(ids).float() @ table


def cosine_similarity(a, b):
    a = a / a.norm(dim=1, keepdim=True)
    b = b / b.norm(dim=1, keepdim=True)
    return a @ b.T


def cosine_dot_only(a, b):
    return a @ b.T


def cosine_wrong_dim(a, b):
    return (a / a.norm(dim=0, keepdim=True)) @ (b / b.norm(dim=0, keepdim=True)).T


# Ch. 4

def sinusoidal(T, d):
    pe = torch.zeros(T, d)
    for pos in range(T):
        for i in range(0, d, 2):
            angle = pos / 10000 ** (i / d)
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe


def sinusoidal_concat(T, d):
    pos = torch.arange(T)[:, None].float()
    angle = pos / 10000 ** (torch.arange(0, d, 2) / d)
    return torch.cat([angle.sin(), angle.cos()], dim=1)


def sinusoidal_swapped(T, d):
    pe = sinusoidal(T, d)
    return torch.stack([pe[:, 1::2], pe[:, 0::2]], dim=-1).reshape(T, d)


def rope(x, base=10000.0):
    T, hd = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, hd, 2).float() / hd)
    angle = torch.arange(T).float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_interleaved(x, base=10000.0):
    T, hd = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, hd, 2).float() / hd)
    angle = torch.arange(T).float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def rope_wrong_direction(x, base=10000.0):
    T, hd = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, hd, 2).float() / hd)
    angle = torch.arange(T).float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1)


# Ch. 5

def softmax(x, dim=-1):
    e = torch.exp(x - x.max(dim=dim, keepdim=True).values)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_no_max(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_last_dim_only(x, dim=-1):
    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


def causal_mask(T):
    return torch.tril(torch.ones(T, T)).bool()


def causal_mask_upper(T):
    return torch.triu(torch.ones(T, T)).bool()


def causal_mask_blocked_true(T):
    return torch.triu(torch.ones(T, T), diagonal=1).bool()


def causal_mask_no_diagonal(T):
    return torch.tril(torch.ones(T, T), diagonal=-1).bool()


def attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def attention_no_scale(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def attention_mask_wrong_side(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def attention_softmax_dim(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-2) @ v


def attention_with_weights(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def repeat_kv(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)


def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_time(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


# Ch. 6

def swiglu(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate) * (x @ w_up)) @ w_down


def swiglu_swapped(x, w_gate, w_up, w_down):
    return ((x @ w_gate) * F.silu(x @ w_up)) @ w_down


def swiglu_gelu(x, w_gate, w_up, w_down):
    return (F.gelu(x @ w_gate) * (x @ w_up)) @ w_down


# Ch. 7

def rms_norm(x, weight, eps=1e-6):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight


def rms_norm_centred(x, weight, eps=1e-6):
    x = x - x.mean(dim=-1, keepdim=True)
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight


def rms_norm_eps_outside(x, weight, eps=1e-6):
    return x / (torch.sqrt((x * x).mean(dim=-1, keepdim=True)) + eps) * weight


def rms_norm_no_eps(x, weight, eps=1e-6):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True)) * weight


def rms_norm_fixed_eps(x, weight, eps=1e-6):     # the default written in, the argument ignored
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * weight


def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def layer_norm_unbiased(x, weight, bias, eps=1e-5):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias


def layer_norm_std(x, weight, bias, eps=1e-5):   # torch's std() divides by n - 1 as well, and eps is outside
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) * weight + bias


def layer_norm_no_mean(x, weight, bias, eps=1e-5):
    return x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + eps) * weight + bias


# Ch. 8

def prenorm_block(x, attn, mlp, norm1, norm2):
    h = x + attn(norm1(x))
    return h + mlp(norm2(h))


def postnorm_block(x, attn, mlp, norm1, norm2):
    h = norm1(x + attn(x))
    return norm2(h + mlp(h))


def block_no_residual(x, attn, mlp, norm1, norm2):
    return mlp(norm2(attn(norm1(x))))


# Ch. 9

def temperature(logits, t):
    return torch.softmax(logits / t, dim=-1)


def temperature_times(logits, t):
    return torch.softmax(logits * t, dim=-1)


def temperature_after_softmax(logits, t):
    return torch.softmax(logits, dim=-1) / t


def top_k(logits, k):
    values, _ = torch.topk(logits, k)
    return torch.where(logits >= values[..., -1:], logits, torch.tensor(float("-inf")))


def top_k_zero(logits, k):
    values, _ = torch.topk(logits, k)
    return torch.where(logits >= values[..., -1:], logits, torch.tensor(0.0))


def top_k_strict(logits, k):
    values, _ = torch.topk(logits, k)
    return torch.where(logits > values[..., -1:], logits, torch.tensor(float("-inf")))


def top_p(logits, p):
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, idx = torch.sort(probs, descending=True, dim=-1)
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    remove_sorted = before >= p
    remove = torch.zeros_like(remove_sorted).scatter(-1, idx, remove_sorted)
    return logits.masked_fill(remove, float("-inf"))


def top_p_one_too_few(logits, p):
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, idx = torch.sort(probs, descending=True, dim=-1)
    remove_sorted = torch.cumsum(sorted_probs, dim=-1) > p
    remove = torch.zeros_like(remove_sorted).scatter(-1, idx, remove_sorted)
    return logits.masked_fill(remove, float("-inf"))


def top_p_logits_cumsum(logits, p):
    sorted_logits, idx = torch.sort(logits, descending=True, dim=-1)
    remove_sorted = torch.cumsum(sorted_logits, dim=-1) - sorted_logits >= p
    remove = torch.zeros_like(remove_sorted).scatter(-1, idx, remove_sorted)
    return logits.masked_fill(remove, float("-inf"))


# Ch. 10

def kv_decode_step(q, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat([k_cache, k_new], dim=2)
    v_cache = torch.cat([v_cache, v_new], dim=2)
    w = torch.softmax(q @ k_cache.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v_cache, k_cache, v_cache


def kv_decode_attend_before_append(q, k_new, v_new, k_cache, v_cache):
    if k_cache.shape[2] == 0:
        out = v_new
    else:
        w = torch.softmax(q @ k_cache.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        out = w @ v_cache
    return out, torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)


def kv_decode_wrong_axis(q, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat([k_cache, k_new], dim=-1)
    v_cache = torch.cat([v_cache, v_new], dim=-1)
    return q, k_cache, v_cache


def kv_decode_tril_mask(q, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat([k_cache, k_new], dim=2)
    v_cache = torch.cat([v_cache, v_new], dim=2)
    scores = q @ k_cache.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.ones(scores.shape[-2], scores.shape[-1]).tril().bool()
    w = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return w @ v_cache, k_cache, v_cache


def kv_cache_bytes(n_layers, n_heads, n_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * head_dim * seq_len * batch_size * bytes_per_value


def kv_cache_bytes_no_two(n_layers, n_heads, n_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_value=2):
    return n_layers * n_kv_heads * head_dim * seq_len * batch_size * bytes_per_value


def kv_cache_bytes_query_heads(n_layers, n_heads, n_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_value=2):
    return 2 * n_layers * n_heads * head_dim * seq_len * batch_size * bytes_per_value


# Ch. 11

def online_softmax(x, block_size):
    m = torch.full(x.shape[:-1] + (1,), float("-inf"))
    s = torch.zeros(x.shape[:-1] + (1,))
    for start in range(0, x.shape[-1], block_size):
        block = x[..., start:start + block_size]
        m_new = torch.maximum(m, block.max(dim=-1, keepdim=True).values)
        s = s * torch.exp(m - m_new) + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        m = m_new
    return torch.exp(x - m) / s


def online_softmax_no_rescale(x, block_size):
    m = torch.full(x.shape[:-1] + (1,), float("-inf"))
    s = torch.zeros(x.shape[:-1] + (1,))
    for start in range(0, x.shape[-1], block_size):
        block = x[..., start:start + block_size]
        m = torch.maximum(m, block.max(dim=-1, keepdim=True).values)
        s = s + torch.exp(block - m).sum(dim=-1, keepdim=True)
    return torch.exp(x - m) / s


def online_softmax_no_max(x, block_size):
    s = torch.zeros(x.shape[:-1] + (1,))
    for start in range(0, x.shape[-1], block_size):
        s = s + torch.exp(x[..., start:start + block_size]).sum(dim=-1, keepdim=True)
    return torch.exp(x) / s


def sliding_window_mask(T, window):
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (j <= i) & (i - j < window)


def sliding_window_one_too_many(T, window):
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (j <= i) & (i - j <= window)


def sliding_window_not_causal(T, window):
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (i - j).abs() < window


# Ch. 12

def cross_entropy_shifted(logits, ids):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))


def cross_entropy_unshifted(logits, ids):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids.reshape(-1))


def cross_entropy_wrong_shift(logits, ids):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, 1:].reshape(-1, V), ids[:, :-1].reshape(-1))


# Ch. 13

def cross_attention(x, memory, w_q, w_k, w_v):
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def cross_attention_self(x, memory, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def cross_attention_causal(x, memory, w_q, w_k, w_v):
    q, k, v = x @ w_q, memory @ w_k, memory @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.ones(scores.shape[-2:]).tril().bool()
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v


# Ch. 14

def linear_cka(x, y):
    x = x - x.mean(dim=0)
    y = y - y.mean(dim=0)
    return (y.T @ x).norm() ** 2 / ((x.T @ x).norm() * (y.T @ y).norm())


def linear_cka_uncentred(x, y):
    return (y.T @ x).norm() ** 2 / ((x.T @ x).norm() * (y.T @ y).norm())


def linear_cka_rows(x, y):
    x = x - x.mean(dim=1, keepdim=True)
    y = y - y.mean(dim=1, keepdim=True)
    return (y.T @ x).norm() ** 2 / ((x.T @ x).norm() * (y.T @ y).norm())


# Ch. 15

def logit_lens(resid, final_norm, unembed):
    return unembed(final_norm(resid))


def logit_lens_no_norm(resid, final_norm, unembed):
    return unembed(resid)


def logit_lens_probs(resid, final_norm, unembed):
    return torch.softmax(unembed(final_norm(resid)), dim=-1)


# Ch. 16

def steering_vector(acts_pos, acts_neg):
    return acts_pos.mean(dim=0) - acts_neg.mean(dim=0)


def steering_vector_reversed(acts_pos, acts_neg):
    return acts_neg.mean(dim=0) - acts_pos.mean(dim=0)


def steering_vector_sums(acts_pos, acts_neg):
    return acts_pos.sum(dim=0) - acts_neg.sum(dim=0)


RIGHT = {
    "greedy_next_token": greedy_next_token, "bpe_pair_counts": pair_counts, "bpe_merge": bpe_merge,
    "one_hot_embedding": one_hot_embedding, "cosine_similarity": cosine_similarity, "sinusoidal": sinusoidal,
    "rope": rope, "softmax": softmax, "causal_mask": causal_mask, "sdpa": attention, "gqa_repeat_kv": repeat_kv,
    "swiglu": swiglu, "rms_norm": rms_norm, "layer_norm": layer_norm, "prenorm_block": prenorm_block,
    "temperature": temperature, "top_k": top_k, "top_p": top_p, "kv_decode_step": kv_decode_step,
    "kv_cache_bytes": kv_cache_bytes, "online_softmax": online_softmax, "sliding_window_mask": sliding_window_mask,
    "cross_entropy_shifted": cross_entropy_shifted, "cross_attention": cross_attention, "linear_cka": linear_cka,
    "logit_lens": logit_lens, "steering_vector": steering_vector,
}

# (exercise, wrong solution, words the feedback must contain)
WRONG = [
    ("greedy_next_token", greedy_first_position, ["FIRST position", "last position"]),
    ("greedy_next_token", greedy_every_position, ["every position"]),
    ("bpe_pair_counts", pair_counts_skip_last, ["last pair is missing"]),
    ("bpe_pair_counts", pair_counts_set, ["how OFTEN"]),
    ("bpe_merge", bpe_merge_step_one, ["skip BOTH tokens"]),
    ("bpe_merge", bpe_merge_drop_last, ["last token is missing"]),
    ("one_hot_embedding", one_hot_only, ["one-hot vectors themselves"]),
    ("one_hot_embedding", one_hot_too_few_classes, ["num_classes=table.shape[0]"]),
    ("cosine_similarity", cosine_dot_only, ["not normalised", "dot product"]),
    ("cosine_similarity", cosine_wrong_dim, ["wrong dimension"]),
    ("sinusoidal", sinusoidal_concat, ["interleaves"]),
    ("sinusoidal", sinusoidal_swapped, ["sin and cos are swapped"]),
    ("rope", rope_interleaved, ["interleaved", "split halves"]),
    ("rope", rope_wrong_direction, ["wrong way"]),
    ("softmax", softmax_no_max, ["overflowed", "maximum"]),
    ("softmax", softmax_last_dim_only, ["wrong dimension"]),
    ("causal_mask", causal_mask_upper, ["upper triangle", "FUTURE"]),
    ("causal_mask", causal_mask_blocked_true, ["wrong side"]),
    ("causal_mask", causal_mask_no_diagonal, ["diagonal is missing"]),
    ("sdpa", attention_no_scale, ["sqrt(d)"]),
    ("sdpa", attention_mask_wrong_side, ["mask is on the wrong side"]),
    ("sdpa", attention_softmax_dim, ["wrong dimension"]),
    ("gqa_repeat_kv", repeat_kv_tiled, ["wrong order", "repeat_interleave"]),
    ("gqa_repeat_kv", repeat_kv_time, ["time axis"]),
    ("swiglu", swiglu_swapped, ["wrong branch"]),
    ("swiglu", swiglu_gelu, ["GeGLU"]),
    ("rms_norm", rms_norm_centred, ["subtracted the mean", "LayerNorm"]),
    ("rms_norm", rms_norm_eps_outside, ["inside the square root"]),
    ("rms_norm", rms_norm_no_eps, ["eps is missing", "the eps the function is given"]),
    ("rms_norm", rms_norm_fixed_eps, ["eps is missing", "the eps the function is given"]),
    ("layer_norm", layer_norm_unbiased, ["unbiased", "unbiased=False"]),
    ("layer_norm", layer_norm_no_mean, ["mean was not subtracted"]),
    ("prenorm_block", postnorm_block, ["post-norm"]),
    ("prenorm_block", block_no_residual, ["residual connections are missing"]),
    ("temperature", temperature_times, ["multiplied by the temperature"]),
    ("temperature", temperature_after_softmax, ["BEFORE the softmax"]),
    ("top_k", top_k_zero, ["-inf, not 0"]),
    ("top_k", top_k_strict, ["one token too few"]),
    ("top_p", top_p_one_too_few, ["one token too few"]),
    ("top_p", top_p_logits_cumsum, ["PROBABILITIES"]),
    ("kv_decode_step", kv_decode_attend_before_append, ["only to the old cache"]),
    ("kv_decode_step", kv_decode_wrong_axis, ["time axis"]),
    ("kv_decode_step", kv_decode_tril_mask, ["keeps only the FIRST key"]),
    ("kv_cache_bytes", kv_cache_bytes_no_two, ["factor 2"]),
    ("kv_cache_bytes", kv_cache_bytes_query_heads, ["n_kv_heads"]),
    ("online_softmax", online_softmax_no_rescale, ["rescaled"]),
    ("online_softmax", online_softmax_no_max, ["overflowed", "running maximum"]),
    ("sliding_window_mask", sliding_window_one_too_many, ["one key too many"]),
    ("sliding_window_mask", sliding_window_not_causal, ["still causal"]),
    ("cross_entropy_shifted", cross_entropy_unshifted, ["not shifted"]),
    ("cross_entropy_shifted", cross_entropy_wrong_shift, ["shifted the wrong way"]),
    ("cross_attention", cross_attention_self, ["encoder output", "self-attention"]),
    ("cross_attention", cross_attention_causal, ["no causal mask"]),
    ("linear_cka", linear_cka_uncentred, ["not centred"]),
    ("linear_cka", linear_cka_rows, ["centre each COLUMN"]),
    ("logit_lens", logit_lens_no_norm, ["final norm is missing"]),
    ("logit_lens", logit_lens_probs, ["probabilities"]),
    ("steering_vector", steering_vector_reversed, ["sign is reversed"]),
    ("steering_vector", steering_vector_sums, ["summed instead of averaging"]),
]

# The build-it exercises of chapters 5 and 8 (a GQA layer, a whole Llama block) keep their solutions apart.
from solutions_05_09 import RIGHT as RIGHT_05_09, WRONG as WRONG_05_09  # noqa: E402

from solutions_00_04 import RIGHT as RIGHT_00_04, WRONG as WRONG_00_04  # noqa: E402

RIGHT.update(RIGHT_05_09)
WRONG += WRONG_05_09
RIGHT.update(RIGHT_00_04)
WRONG += WRONG_00_04

# Chapter 10b (how the weights are stored): its solutions live with the chapter's own tests.
from test_chapter_10b import (int8_by_128, int8_per_tensor, int8_right, int8_truncate, q4_1_high_first,  # noqa: E402
                              q4_1_interleaved, q4_1_no_min, q4_1_right)

RIGHT.update({"dequantize_q4_1": q4_1_right, "quantize_int8_rows": int8_right})
WRONG += [("dequantize_q4_1", q4_1_interleaved, ["interleaved"]),
          ("dequantize_q4_1", q4_1_no_min, ["forgot the minimum"]),
          ("dequantize_q4_1", q4_1_high_first, ["high nibbles first"]),
          ("quantize_int8_rows", int8_truncate, ["rounding vs truncation"]),
          ("quantize_int8_rows", int8_per_tensor, ["per-tensor instead of per-row"]),
          ("quantize_int8_rows", int8_by_128, ["127"])]


# Chapter 15's build-it exercises: causal tracing (one restored state) and direct logit attribution.
def _restore_one(model, ids, subject, layer, position, answer, noise, point="resid_post", every=False,
                 noisy=True, logit=False):
    from llmlab.inspection import capture, hook_name, hooks
    name = hook_name(layer, point)
    _, clean = capture(model, None, ids, names=[name])

    def add_noise(x):
        x = x.clone()
        x[:, subject] += noise
        return x

    def restore(x):
        x = x.clone()
        where = slice(None) if every else position
        x[:, where] = clean[name][:, where]
        return x
    fns = {name: restore, **({"hook_embed": add_noise} if noisy else {})}
    with torch.no_grad(), hooks(model, fns):
        last = model(ids)[0, -1]
    return last[answer] if logit else torch.softmax(last, -1)[answer]


def restore_one(model, ids, subject, layer, position, answer, noise):
    return _restore_one(model, ids, subject, layer, position, answer, noise)


def restore_one_pre(model, ids, subject, layer, position, answer, noise):
    return _restore_one(model, ids, subject, layer, position, answer, noise, point="resid_pre")


def restore_one_every_position(model, ids, subject, layer, position, answer, noise):
    return _restore_one(model, ids, subject, layer, position, answer, noise, every=True)


def restore_one_logit(model, ids, subject, layer, position, answer, noise):
    return _restore_one(model, ids, subject, layer, position, answer, noise, logit=True)


def logit_shares(parts, norm_weight, eps, unembed_row):
    h = parts.sum(0)
    return (parts * torch.rsqrt(h.pow(2).mean() + eps) * norm_weight) @ unembed_row


def logit_shares_own_rms(parts, norm_weight, eps, unembed_row):
    return (parts * torch.rsqrt(parts.pow(2).mean(-1, keepdim=True) + eps) * norm_weight) @ unembed_row


def logit_shares_no_weight(parts, norm_weight, eps, unembed_row):
    h = parts.sum(0)
    return (parts * torch.rsqrt(h.pow(2).mean() + eps)) @ unembed_row


def induction_score(pattern, length):
    second = torch.arange(length, 2 * length - 1)
    return pattern[:, :, second, second - length + 1].mean(dim=(0, 2))


def induction_score_same_token(pattern, length):
    second = torch.arange(length, 2 * length - 1)
    return pattern[:, :, second, second - length].mean(dim=(0, 2))


def induction_score_previous(pattern, length):
    second = torch.arange(length, 2 * length - 1)
    return pattern[:, :, second, second - 1].mean(dim=(0, 2))


RIGHT.update({"induction_score": induction_score})
WRONG += [("induction_score", induction_score_same_token, ["t - L + 1", "duplicate-token"]),
          ("induction_score", induction_score_previous, ["previous-token"])]
RIGHT.update({"restore_one": restore_one, "logit_shares": logit_shares})
WRONG += [("restore_one", restore_one_pre, ["ENTERS block"]),
          ("restore_one", restore_one_every_position, ["every position"]),
          ("restore_one", restore_one_logit, ["logit"]),
          ("logit_shares", logit_shares_own_rms, ["its OWN rms"]),
          ("logit_shares", logit_shares_no_weight, ["norm_weight"])]

# Chapter 16's build-it exercise: activation patching of one attention head.
def _patch_head(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong, point="attn.z", index=None,
                swapped=False, measure="fraction"):
    from llmlab.inspection import capture, hook_name, hooks
    name = hook_name(layer, point)
    source, target = (corrupt_ids, clean_ids) if swapped else (clean_ids, corrupt_ids)
    _, cache = capture(model, None, source, names=[name])
    where = index if index is not None else (slice(None), position, head)

    def put_back(x):
        x = x.clone()
        x[where] = cache[name][where]
        return x

    def diff(ids, fns=None):
        with torch.no_grad(), hooks(model, fns or {}):
            last = model(ids)[0, -1]
        return last[answer] - last[wrong]

    clean, corrupt = diff(clean_ids), diff(corrupt_ids)
    patched = diff(target, {name: put_back})
    if measure == "raw":
        return patched
    if measure == "over_clean":
        return patched / clean
    return (patched - corrupt) / (clean - corrupt)


def patch_head(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong):
    return _patch_head(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong)


def patch_head_whole_block(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong):
    return _patch_head(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong, point="resid_post",
                       index=(slice(None), position))


def patch_head_after_o_proj(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong):
    hd = model.config.head_dim
    return _patch_head(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong, point="attn_out",
                       index=(slice(None), position, slice(head * hd, (head + 1) * hd)))


def patch_head_kv_index(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong):
    group = model.config.n_heads // model.config.n_kv_heads
    return _patch_head(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong,
                       index=(slice(None), position, head // group))


def patch_head_last_position(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong):
    return _patch_head(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong,
                       index=(slice(None), -1, head))


def patch_head_over_clean(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong):
    return _patch_head(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong, measure="over_clean")


def patch_head_swapped(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong):
    return _patch_head(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong, swapped=True)


RIGHT.update({"patch_head": patch_head})
WRONG += [("patch_head", patch_head_whole_block, ["whole block's output"]),
          ("patch_head", patch_head_after_o_proj, ["AFTER o_proj"]),
          ("patch_head", patch_head_kv_index, ["key/value head", "GQA"]),
          ("patch_head", patch_head_last_position, ["at the last position"]),
          ("patch_head", patch_head_over_clean, ["divided the patched logit difference by the clean one"]),
          ("patch_head", patch_head_swapped, ["clean and corrupted are swapped"])]


# Chapter 15's tuned lens, fitted in closed form (ridge regression) on SmolLM2's own residual stream.
def _tuned_lens(stream, train, layer, norm_weight, eps, unembed, ridge, src=1, fit="train", norm=True,
                transpose=False, target="raw", probs=False):
    x = stream[layer + src]                                       # (N, d), float32 as a learner would keep it
    y = stream[-1]
    if target == "normed":
        y = y / torch.sqrt(y.pow(2).mean(-1, keepdim=True) + eps) * norm_weight
    delta = y - x
    rows = {"train": train, "held_out": ~train, "all": torch.ones_like(train)}[fit]
    xt, dt = x[rows], delta[rows]
    mx, md = xt.mean(0), dt.mean(0)
    d = x.shape[1]
    # ridge as least squares on an augmented system: [X; sqrt(ridge) I] A = [D; 0]
    big_x = torch.cat([xt - mx, math.sqrt(ridge) * torch.eye(d)])
    big_d = torch.cat([dt - md, torch.zeros(d, d)])
    a = torch.linalg.lstsq(big_x.double(), big_d.double()).solution.float()    # (d, d)
    if transpose:
        a = a.T
    h = x[~train] + (x[~train] - mx) @ a + md
    if norm and target == "raw":
        h = h / torch.sqrt(h.pow(2).mean(-1, keepdim=True) + eps) * norm_weight
    logits = h @ unembed.T
    return logits.softmax(-1) if probs else logits


def tuned_lens(stream, train, layer, norm_weight, eps, unembed, ridge):
    return _tuned_lens(stream, train, layer, norm_weight, eps, unembed, ridge)


def tuned_lens_fit_on_held_out(stream, train, layer, norm_weight, eps, unembed, ridge):
    return _tuned_lens(stream, train, layer, norm_weight, eps, unembed, ridge, fit="held_out")


def tuned_lens_fit_on_all(stream, train, layer, norm_weight, eps, unembed, ridge):
    return _tuned_lens(stream, train, layer, norm_weight, eps, unembed, ridge, fit="all")


def tuned_lens_off_by_one(stream, train, layer, norm_weight, eps, unembed, ridge):
    return _tuned_lens(stream, train, layer, norm_weight, eps, unembed, ridge, src=0)


def tuned_lens_no_norm(stream, train, layer, norm_weight, eps, unembed, ridge):
    return _tuned_lens(stream, train, layer, norm_weight, eps, unembed, ridge, norm=False)


def tuned_lens_normed_target(stream, train, layer, norm_weight, eps, unembed, ridge):
    return _tuned_lens(stream, train, layer, norm_weight, eps, unembed, ridge, target="normed")


def tuned_lens_transposed(stream, train, layer, norm_weight, eps, unembed, ridge):
    return _tuned_lens(stream, train, layer, norm_weight, eps, unembed, ridge, transpose=True)


def tuned_lens_probabilities(stream, train, layer, norm_weight, eps, unembed, ridge):
    return _tuned_lens(stream, train, layer, norm_weight, eps, unembed, ridge, probs=True)


def tuned_lens_no_ridge(stream, train, layer, norm_weight, eps, unembed, ridge):
    x, delta = stream[layer + 1][train], stream[-1][train] - stream[layer + 1][train]
    a = torch.linalg.solve((x.T @ x).double(), (x.T @ delta).double())      # singular: fewer rows than d
    return stream[layer + 1][~train] @ a.float() @ unembed.T


RIGHT.update({"tuned_lens": tuned_lens})
WRONG += [("tuned_lens", tuned_lens_fit_on_held_out, ["held-out rows (~train)"]),
          ("tuned_lens", tuned_lens_fit_on_all, ["every row"]),
          ("tuned_lens", tuned_lens_off_by_one, ["ENTERS block", "stream[layer + 1]"]),
          ("tuned_lens", tuned_lens_no_norm, ["final norm is missing"]),
          ("tuned_lens", tuned_lens_normed_target, ["BEFORE the final norm"]),
          ("tuned_lens", tuned_lens_transposed, ["transposed"]),
          ("tuned_lens", tuned_lens_probabilities, ["probabilities"]),
          ("tuned_lens", tuned_lens_no_ridge, ["ridge * torch.eye(d)"])]


# Chapter 12: a stable cross-entropy and the learning-rate schedule, each with the mistakes its check names.
def stable_cross_entropy(logits, targets):
    shifted = logits - logits.max(-1, keepdim=True).values       # exp(0) at each row's max: no overflow
    return (shifted.exp().sum(-1).log() - shifted.gather(-1, targets[:, None])[:, 0]).mean()


def cross_entropy_without_shift(logits, targets):
    return (logits.exp().sum(-1).log() - logits.gather(-1, targets[:, None])[:, 0]).mean()


def cross_entropy_summed(logits, targets):
    return stable_cross_entropy(logits, targets) * len(targets)


def cosine_schedule(it, max_lr, min_lr, warmup, cycle):
    if it < warmup:
        return it / warmup * max_lr
    if it <= cycle:
        return min_lr + 0.5 * (1 + math.cos(math.pi * (it - warmup) / (cycle - warmup))) * (max_lr - min_lr)
    return min_lr


def warmup_off_by_one(it, max_lr, min_lr, warmup, cycle):
    return (it + 1) / warmup * max_lr if it < warmup else cosine_schedule(it, max_lr, min_lr, warmup, cycle)


def decays_past_the_cycle(it, max_lr, min_lr, warmup, cycle):
    if it < warmup:
        return it / warmup * max_lr
    return min_lr + 0.5 * (1 + math.cos(math.pi * (it - warmup) / (cycle - warmup))) * (max_lr - min_lr)


RIGHT.update({"stable_cross_entropy": stable_cross_entropy, "cosine_schedule": cosine_schedule})
WRONG += [("stable_cross_entropy", cross_entropy_without_shift, ["overflowed", "subtract each row's max"]),
          ("stable_cross_entropy", cross_entropy_summed, ["MEAN"]),
          ("cosine_schedule", warmup_off_by_one, ["off by one"]),
          ("cosine_schedule", decays_past_the_cycle, ["stay at min_lr"])]


def test_registry_is_complete_and_spread_over_the_chapters():
    ids = [ex.id for ex in EXERCISES]
    assert len(ids) == len(set(ids)), "duplicate exercise ids"
    assert set(ids) == set(RIGHT), "every registered exercise needs a right solution in this test"
    assert {wrong[0] for wrong in WRONG} == set(ids), "every exercise needs wrong solutions in this test"
    for ex_id in ids:
        assert sum(1 for w in WRONG if w[0] == ex_id) >= 2, f"{ex_id}: fewer than two wrong solutions tested"
    assert {ex.chapter for ex in EXERCISES} >= set(range(2, 17)), "each of chapters 2-16 needs an exercise"
    for must in ["softmax", "causal_mask", "sdpa", "rope", "rms_norm", "bpe_merge", "kv_decode_step", "top_p"]:
        assert must in ids


def test_the_exercise_list_says_what_temperature_returns(capsys):
    from llmlab.cli import main

    assert main(["exercises"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "  temperature  " in line)
    assert line.endswith("temperature(logits, t) -> probabilities")   # not "scale the logits"


@pytest.mark.parametrize("exercise", sorted(RIGHT))
def test_right_solution_passes(exercise):
    result = check(exercise, RIGHT[exercise], quiet=True)
    assert result.passed, result.message
    assert result.status == "pass" and bool(result) is True


# Common wrong answers that must not earn partial credit in `llmlab grade`: every hidden case of their
# exercise is one they get wrong (no T = 1 mask, where the upper and lower triangles agree; logits far
# from 0 in every softmax case; short vectors, where dividing by n - 1 instead of n shows).
NO_CREDIT = [("causal_mask", causal_mask_upper), ("softmax", softmax_no_max), ("layer_norm", layer_norm_unbiased),
             ("layer_norm", layer_norm_std), ("online_softmax", online_softmax_no_max)]


@pytest.mark.parametrize("salt", [0, 8191])
@pytest.mark.parametrize("exercise, fn", NO_CREDIT, ids=[f"{e}-{f.__name__}" for e, f in NO_CREDIT])
def test_common_mistakes_earn_no_partial_credit(exercise, fn, salt, monkeypatch):
    """Scored as the grader scores (case by case, with its own salt on the hidden cases): 0 points for
    the mistake, full points for the reference solution."""
    from llmlab.exercises import core, run_check
    from llmlab.exercises.core import Learner

    monkeypatch.setattr(core, "_SALT", salt)
    wrong = run_check(exercise, Learner(fn, fn.__name__), partial=True)
    assert wrong.status == "fail" and wrong.score == 0, wrong.message
    assert wrong.message.endswith(" comparisons right)") and "(0 of " in wrong.message
    right = run_check(exercise, Learner(RIGHT[exercise], exercise), partial=True)
    assert right.status == "pass" and right.score == 1, right.message


@pytest.mark.parametrize("exercise, fn, words", WRONG, ids=[f"{e}-{f.__name__}" for e, f, _ in WRONG])
def test_wrong_solution_fails_and_names_the_mistake(exercise, fn, words):
    result = check(exercise, fn, quiet=True)
    assert result.status == "fail", result.message
    for word in words:
        assert word in result.message, f"{word!r} missing from feedback:\n{result.message}"


def test_sdpa_accepts_output_and_weights():
    assert check("sdpa", attention_with_weights, quiet=True).passed


def test_messages_say_input_expected_and_got():
    def bad_causal(T):
        return torch.ones(T, T, dtype=torch.bool)
    message = check("causal_mask", bad_causal, quiet=True).message
    assert "bad_causal(T = 4)" in message and "first at index (0, 1): expected False, got True" in message
    assert "nothing is masked" in message
    message = check("rms_norm", lambda x, w, eps: x * 2, quiet=True).message
    assert "expected:" in message and "got:" in message and "tensor([[1., 2., 3., 4.]])" in message


# ------------------------------------------------------------------ broken code becomes feedback


def test_exception_becomes_feedback_with_the_line():
    def softmax_raises(x, dim=-1):
        return x / 0 + undefined_name  # noqa: F821
    result = check("softmax", softmax_raises, quiet=True)
    assert result.status == "fail"
    assert "NameError" in result.message and "undefined_name" in result.message
    assert "line" in result.message


def test_wrong_type_wrong_shape_and_nan_become_feedback():
    result = check("softmax", lambda x, dim=-1: x.tolist(), quiet=True)
    assert result.status == "fail" and "list" in result.message
    result = check("softmax", lambda x, dim=-1: x.numpy(), quiet=True)
    assert "numpy" in result.message or "ndarray" in result.message
    result = check("softmax", lambda x, dim=-1: x.sum(dim), quiet=True)
    assert result.status == "fail" and "shape" in result.message
    result = check("softmax", lambda x, dim=-1: x * float("nan"), quiet=True)
    assert result.status == "fail" and "nan" in result.message
    result = check("causal_mask", lambda T: torch.ones(T, T).tril(), quiet=True)
    assert result.status == "fail" and "bool" in result.message
    result = check("causal_mask", lambda T: torch.full((T, T), float("-inf")).triu(1), quiet=True)
    assert "additive" in result.message
    result = check("kv_decode_step", lambda *a: a[0], quiet=True)
    assert result.status == "fail" and "tuple of three" in result.message


def test_infinite_loop_is_stopped_by_the_time_limit():
    def forever(x, dim=-1):
        while True:
            pass

    def stubborn(x, dim=-1):
        while True:
            try:
                while True:
                    pass
            except Exception:  # a learner's catch-all does not swallow the time limit
                pass
    for fn in (forever, stubborn):
        result = check("softmax", fn, time_limit=0.5, quiet=True)
        assert result.status == "fail" and "did not return within 0.5 s" in result.message


def test_infinite_loop_is_stopped_outside_the_main_thread():
    def forever(x, dim=-1):
        i = 0
        while True:
            i += 1
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("r", check("softmax", forever, time_limit=0.5, quiet=True)))
    worker.start()
    worker.join(60)   # generous: only that it finishes at all is tested, not how fast
    assert not worker.is_alive()
    assert "did not return within" in box["r"].message


def test_not_implemented_is_not_attempted():
    def stub(x, dim=-1):
        raise NotImplementedError("Exercise softmax: write your solution here")
    result = check("softmax", stub, quiet=True)
    assert result.status == "not-attempted" and not result.passed
    assert "NotImplementedError" in result.message


def test_author_mistakes_are_feedback_too():
    assert check("softmaxx", softmax, quiet=True).status == "error"
    result = check("softmax", softmax(torch.ones(3)), quiet=True)
    assert result.status == "fail" and "without calling it" in result.message


def test_inputs_are_not_shared_with_the_learner():
    def in_place(x, dim=-1):
        x -= x.max(dim, keepdim=True).values
        x.exp_()
        return x / x.sum(dim, keepdim=True)
    assert check("softmax", in_place, quiet=True).passed


def test_display_text_and_html(capsys):
    result = check("softmax", softmax)
    assert "[PASSED] softmax" in capsys.readouterr().out
    html = result._repr_html_()
    assert "Passed" in html and "<pre" in html
    fail = CheckResult("x", "fail", "a <b> & c")
    assert "a &lt;b&gt; &amp; c" in fail._repr_html_()


def test_check_records_the_function_only_under_the_grader(monkeypatch):
    import llmlab.exercises as exercises
    monkeypatch.setattr(exercises, "SUBMITTED", {})
    check("softmax", softmax, quiet=True)
    assert exercises.SUBMITTED == {}
    monkeypatch.setenv("LLMLAB_GRADING", "1")
    check("softmax", softmax, quiet=True)
    check("causal_mask", causal_mask_upper, quiet=True)
    assert exercises.SUBMITTED == {"softmax": softmax, "causal_mask": causal_mask_upper}


def test_nan_and_dtype_messages():
    result = check("softmax", lambda x, dim=-1: x * float("nan"), quiet=True)
    assert "NaN (not a number) came out of finite inputs" in result.message and "overflow" not in result.message
    result = check("softmax", lambda x, dim=-1: torch.softmax(x.bfloat16(), dim), quiet=True)
    assert result.status == "fail" and "torch.bfloat16" in result.message and "float32" in result.message
