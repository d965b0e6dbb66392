"""Checks for the attention exercises (chapters 5, 11 and 13).

Each check calls the learner's function on hidden cases, compares with llmlab's reference and,
when the answer matches a known wrong variant (computed here), names that mistake.
Mask convention everywhere: a boolean tensor, True = this query may attend to this key.
"""
from __future__ import annotations

import math

import torch

from llmlab.exercises.compare import expect_tensor
from llmlab.exercises.core import Learner, generator
from llmlab.exercises.results import Mistake
from llmlab.exercises.messages import say

# written in the learner's language where it is used: say(OVERFLOW_HINT)
OVERFLOW_HINT = ("exp() overflowed: e^1000 is inf in float32, and inf/inf is NaN. Subtract the maximum "
                 "along `dim` before exp, x - x.max(dim, keepdim=True).values: the softmax does not change, "
                 "and the largest exponent becomes e^0 = 1.")


def check_softmax(fn: Learner) -> str:
    """softmax(x, dim=-1): exp(x) / sum(exp(x)) along `dim`, stable for large inputs."""
    from llmlab.attention import softmax as reference

    # Every case holds logits far from 0 (exp overflows above ~88 and gives 0 below ~-103 in float32), so an
    # answer without the max shift is wrong on each of them and earns no partial credit in `llmlab grade`.
    g = generator(5)
    batch = torch.randn(2, 3, 5, generator=g)
    batch[1] += 1000.0                                           # the second sequence's logits near 1000
    cases = [
        (torch.tensor([[1.0, 2.0, 3.0], [1001.0, 1002.0, 1003.0]]), -1),
        (batch, -1),
        (torch.randn(4, 6, generator=g) * 3 + 800.0, 0),        # dim=0: each column a softmax
        (torch.tensor([[0.5, float("-inf"), 2.0, 1.0],           # a masked entry must get probability 0
                       [-999.5, float("-inf"), -998.0, -999.0]]), -1),   # exp() of these underflows to 0
        (torch.tensor([[1000.0, 1001.0, 1002.0]]), -1),
    ]
    for x, dim in cases:
        got = fn(x, dim, names=("x", "dim"))
        other = 0 if dim != 0 else -1
        expect_tensor(fn, got, reference(x, dim=dim), nonfinite_hint=say(OVERFLOW_HINT), mistakes=[
            (say("your result is the softmax over dim={a}, not over dim={b}: you normalised over the wrong "
                 "dimension. Take the max and the sum along the `dim` argument, with keepdim=True.", a=other, b=dim),
             torch.softmax(x, dim=other)),
            (say("your result is the softmax over dim=-2, not dim=-1: you normalised over the wrong dimension."),
             torch.softmax(x, dim=-2) if x.dim() > 1 else x),
            (say("you returned exp(x) without dividing by the sum of the exponentials along `dim`."),
             (x - x.max(dim, keepdim=True).values).exp()),
            (say("you returned exp(x) without dividing by the sum of the exponentials along `dim`."), x.exp()),
            (say("you divided by the sum over ALL elements; sum only along `dim` (x.sum(dim, keepdim=True))."),
             x.exp() / x.exp().sum()),
        ])
    return (say("matches llmlab.attention.softmax on 5 hidden cases, including dim=0, a -inf entry and logits near "
            "1000 and -1000."))


def check_causal_mask(fn: Learner) -> str:
    """causal_mask(T) -> bool (T, T), True where key j <= query i (each token sees itself and the past)."""
    from llmlab.attention import causal_mask as reference

    fn.error_hints = [("tril", say("torch.tril(torch.ones(T, T, dtype=torch.bool)) builds the lower triangle."))]
    for T in (4, 2, 7):       # no T = 1: there the upper and the lower triangle agree, so a reversed mask would pass
        got = fn(T, names=("T",))
        if isinstance(got, torch.Tensor) and got.is_floating_point() and torch.isinf(got).any():
            raise Mistake(say("{a} returned an additive float mask (0 and -inf). This exercise asks for the boolean mask: "
                              "True where query i may attend to key j (j <= i), False elsewhere.", a=fn.last_call))
        ones = torch.ones(T, T, dtype=torch.bool)
        expect_tensor(fn, got, reference(T), mistakes=[
            (say("your mask is the upper triangle: True above the diagonal lets each token attend to FUTURE tokens. "
             "Row i is the query, column j the key; the allowed keys are j <= i (the lower triangle, torch.tril)."),
             torch.triu(ones)),
            (say("your mask has the right shape but the wrong side: True marks the future positions (what should be "
             "blocked). In llmlab True means 'may attend', so the lower triangle with the diagonal must be True."),
             torch.triu(ones, diagonal=1)),
            (say("the diagonal is missing: each token must be allowed to attend to itself (j == i). Use torch.tril "
             "with diagonal=0, the default."), torch.tril(ones, diagonal=-1)),
            (say("every entry is True, so nothing is masked: the future keys (j > i, above the diagonal) must be "
             "False."), ones),
        ])
    return say("correct lower-triangular boolean masks for T = 2, 4 and 7.")


def _attention(q, k, v, mask=None, scale=None, softmax_dim=-1, invert_mask=False):
    """Plain attention with switchable mistakes (used to recognise wrong answers)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale          # (..., Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(mask if invert_mask else ~mask, float("-inf"))
    return torch.softmax(scores, dim=softmax_dim) @ v  # (..., Tq, dv)


def check_sdpa(fn: Learner) -> str:
    """attention(q, k, v, mask=None) -> out = softmax(q k^T / sqrt(d) + mask) v.

    q (B, H, Tq, d), k (B, H, Tk, d), v (B, H, Tk, dv); mask bool (Tq, Tk), True = may attend.
    Returning (out, weights) is accepted too.
    """
    from llmlab.attention import causal_mask, scaled_dot_product_attention as reference

    g = generator(11)
    cases = [
        (torch.randn(1, 1, 3, 4, generator=g), torch.randn(1, 1, 3, 4, generator=g), torch.randn(1, 1, 3, 5, generator=g), None),
        (torch.randn(2, 3, 5, 16, generator=g) * 2, torch.randn(2, 3, 5, 16, generator=g) * 2,
         torch.randn(2, 3, 5, 6, generator=g), causal_mask(5)),
        (torch.randn(1, 2, 1, 8, generator=g) * 2, torch.randn(1, 2, 6, 8, generator=g) * 2,
         torch.randn(1, 2, 6, 8, generator=g), None),  # one query against six keys: a decode step
    ]
    fn.error_hints = [("must match the size", say("check the shapes: scores = q @ k.transpose(-2, -1) has shape "
                       "(..., Tq, Tk), and the output weights @ v has shape (..., Tq, dv)."))]
    for q, k, v, mask in cases:
        got = fn(q, k, v, mask, names=("q", "k", "v", "mask"))
        expected, expected_weights = reference(q, k, v, mask=mask)
        if isinstance(got, tuple) and len(got) == 2:
            got, weights = got
            expect_tensor(fn, weights, expected_weights, what=say("the attention weights, second item returned"))
        d = q.shape[-1]
        mistakes = [
            (say("the scores were not scaled: divide q k^T by sqrt(d) = sqrt({a}) before the softmax (missing "
                 "1/sqrt(d) makes the softmax too peaked as d grows).", a=d), _attention(q, k, v, mask, scale=1.0)),
            (say("you divided by d = {a}; the scale is 1/sqrt(d) = 1/{b}.", a=d, b=f"{math.sqrt(d):.3g}"),
             _attention(q, k, v, mask, scale=1.0 / d)),
            (say("the softmax ran over the wrong dimension (the queries, dim=-2). Each query's weights over the "
             "keys must sum to 1: softmax over the last dim of the (Tq, Tk) scores."),
             _attention(q, k, v, mask, softmax_dim=-2)),
            (say("you returned the attention weights; the output is weights @ v."),
             torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), -1)),
        ]
        if mask is not None:
            mistakes += [
                (say("the mask was not applied: positions where mask is False must get -inf before the softmax "
                 "(scores.masked_fill(~mask, float('-inf')))."), _attention(q, k, v, None)),
                (say("the mask is on the wrong side: you blocked the positions where mask is True. True means 'may "
                 "attend'; fill -inf where the mask is False (masked_fill(~mask, ...))."),
                 _attention(q, k, v, mask, invert_mask=True)),
            ]
        expect_tensor(fn, got, expected, mistakes=mistakes, atol=1e-5, rtol=1e-4)
    return say("matches llmlab.attention.scaled_dot_product_attention without a mask, with a causal mask, and for one query.")


def check_gqa_repeat_kv(fn: Learner) -> str:
    """repeat_kv(x, n_rep): (B, n_kv, T, hd) -> (B, n_kv * n_rep, T, hd), each KV head repeated n_rep
    times in a row, so query head h uses KV head h // n_rep."""
    from llmlab.attention import repeat_kv as reference

    g = generator(3)
    for shape, n_rep in [((1, 2, 3, 2), 3), ((2, 3, 4, 4), 2), ((1, 1, 5, 4), 4), ((1, 3, 2, 2), 1)]:
        x = torch.randn(*shape, generator=g)
        got = fn(x, n_rep, names=("x", "n_rep"))
        expect_tensor(fn, got, reference(x, n_rep), mistakes=[
            (say("the heads are in the wrong order: you tiled the KV heads (kv0, kv1, kv0, kv1, ...), but query head h "
             "belongs to KV head h // n_rep, so each KV head must be repeated n_rep times in a row "
             "(kv0, kv0, kv1, kv1, ...): x.repeat_interleave(n_rep, dim=1), or x[:, :, None].expand(...).reshape(...)."),
             x.repeat(1, n_rep, 1, 1)),
            (say("you repeated along the time axis (dim 2); repeat the heads (dim 1)."), x.repeat_interleave(n_rep, dim=2)),
            (say("you repeated along head_dim (the last axis); repeat the heads (dim 1)."), x.repeat_interleave(n_rep, dim=-1)),
        ])
    return say("repeats each KV head n_rep times in the right order for n_rep = 1, 2, 3 and 4 (MQA included).")


def check_sliding_window_mask(fn: Learner) -> str:
    """sliding_window_mask(T, window) -> bool (T, T): True where i - window < j <= i
    (each query sees itself and the window - 1 tokens before it)."""
    from llmlab.attention import sliding_window_mask as reference

    for T, window in [(5, 2), (6, 3), (4, 1), (3, 5)]:
        got = fn(T, window, names=("T", "window"))
        i = torch.arange(T)[:, None]
        j = torch.arange(T)[None, :]
        expect_tensor(fn, got, reference(T, window), mistakes=[
            (say("one key too many: the window counts the query itself, so query i sees keys i - window + 1 .. i "
             "(window keys in all), i.e. i - j < window, not i - j <= window."), (j <= i) & (i - j <= window)),
            (say("one key too few: query i must see window keys in all, itself included (i - j < window); "
             "you stopped one short."), (j <= i) & (i - j < window - 1)),
            (say("the future is not masked: a sliding window in a decoder is still causal (j <= i); you allowed "
             "keys on both sides of the query."), (i - j).abs() < window),
            (say("True and False are swapped: True means 'may attend'."), ~((j <= i) & (i - j < window))),
        ])
    return say("correct sliding-window masks for four (T, window) pairs, including a window longer than T.")


def _online_softmax_variant(x, block, rescale=True):
    """Running max m and running sum l over blocks; rescale=False forgets l *= exp(m_old - m_new)."""
    m = torch.full(x.shape[:-1] + (1,), float("-inf"))
    l = torch.zeros(x.shape[:-1] + (1,))
    for s in range(0, x.shape[-1], block):
        blk = x[..., s:s + block]
        m_new = torch.maximum(m, blk.max(-1, keepdim=True).values)
        old = l * torch.exp(m - m_new) if rescale else l
        l = old + torch.exp(blk - m_new).sum(-1, keepdim=True)
        m = m_new
    return torch.exp(x - m) / l


def check_online_softmax(fn: Learner) -> str:
    """online_softmax(x, block_size): softmax over the last dim, reading x in blocks of block_size
    while keeping a running max and a running sum (FlashAttention's trick)."""
    # Each case holds values far from 0, so exp(x) without the running max overflows (or gives 0 / 0)
    # on every one of them: such an answer earns no partial credit in `llmlab grade`.
    g = generator(7)
    cases = [
        (torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                       [1001.0, 1002.0, 1003.0, 1004.0, 1005.0, 1006.0]]), 2),   # the max grows at every block
        (torch.randn(3, 10, generator=g) * 3 + 500.0, 4),    # last block is shorter
        (torch.randn(2, 8, generator=g) - 900.0, 8),         # one block; exp() of these underflows to 0
        (torch.tensor([[1000.0, 999.0, 1002.0, 998.0]]), 1),
    ]
    for x, block in cases:
        got = fn(x, block, names=("x", "block_size"))
        expect_tensor(fn, got, torch.softmax(x, dim=-1), nonfinite_hint=(
            say("exp() overflowed: keep a running maximum m and compute exp(x - m), never exp(x).")), mistakes=[
            (say("when a new block raises the running max from m_old to m_new, the running sum must be rescaled: "
             "l = l * exp(m_old - m_new) + sum(exp(block - m_new)). You added the new block without rescaling "
             "the old sum."), _online_softmax_variant(x, block, rescale=False)),
            (say("the running sum is rescaled in the wrong direction: multiply by exp(m_old - m_new) (a number <= 1), "
             "not exp(m_new - m_old)."), _online_rescale_wrong_way(x, block)),
        ])
    return say("equals torch.softmax for blocks of 1, 2, 4 and 8, a short last block and values near 1000 and -900.")


def _online_rescale_wrong_way(x, block):
    m = torch.full(x.shape[:-1] + (1,), float("-inf"))
    l = torch.zeros(x.shape[:-1] + (1,))
    for s in range(0, x.shape[-1], block):
        blk = x[..., s:s + block]
        m_new = torch.maximum(m, blk.max(-1, keepdim=True).values)
        factor = torch.where(torch.isinf(m), torch.zeros_like(m), torch.exp(m_new - m))
        l = l * factor + torch.exp(blk - m_new).sum(-1, keepdim=True)
        m = m_new
    return torch.exp(x - m) / l


def check_cross_attention(fn: Learner) -> str:
    """cross_attention(x, memory, w_q, w_k, w_v): queries from the decoder states x (B, Tq, d), keys and
    values from the encoder output memory (B, Tk, d); w_* are (d, d_head) matrices used as x @ w.
    No mask: every decoder position may look at every encoder position."""
    g = generator(13)
    for B, Tq, Tk, d, dh in [(1, 3, 5, 4, 4), (2, 4, 6, 8, 8), (1, 3, 3, 6, 4)]:
        x, memory = torch.randn(B, Tq, d, generator=g), torch.randn(B, Tk, d, generator=g)
        w_q, w_k, w_v = (torch.randn(d, dh, generator=g) for _ in range(3))
        got = fn(x, memory, w_q, w_k, w_v, names=("x", "memory", "w_q", "w_k", "w_v"))
        q, k, v = x @ w_q, memory @ w_k, memory @ w_v   # (B, Tq, dh), (B, Tk, dh), (B, Tk, dh)
        causal = torch.ones(Tq, Tk, dtype=torch.bool).tril()
        expect_tensor(fn, got, _attention(q, k, v), mistakes=[
            (say("keys and values must come from the encoder output `memory`; you used the decoder states x "
             "(that is self-attention)."), _attention(q, x @ w_k, x @ w_v)),
            (say("the keys come from x instead of memory: in cross-attention both keys and values come from the "
             "encoder output."), _attention(q, x @ w_k, v) if Tq == Tk else None),
            (say("cross-attention has no causal mask: the whole source sentence is known, so every decoder position "
             "may look at every encoder position."), _attention(q, k, v, causal)),
            (say("the scores were not scaled by 1/sqrt(d_head) = 1/sqrt({a}).", a=dh), _attention(q, k, v, scale=1.0)),
            (say("queries must come from the decoder states x, not from memory."), _attention(memory @ w_q, k, v)),
        ])
    return say("queries from the decoder, keys and values from the encoder, unmasked and scaled: correct on 3 cases.")


# ---------------------------------------------------------------- ch. 5: a GQA attention layer, built by hand

def _rope_halves(x, cos, sin):
    """Split-halves RoPE (Llama / Hugging Face layout): pairs channel j with channel j + hd/2."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def _rope_adjacent(x, cos, sin):
    """The interleaved RoPE layout (pairs 2j, 2j+1) with the same angles: a wrong layout for these weights."""
    half = x.shape[-1] // 2
    c, s = cos[..., :half].repeat_interleave(2, -1), sin[..., :half].repeat_interleave(2, -1)
    pairs = x.view(*x.shape[:-1], half, 2)
    rotated = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
    return x * c + rotated * s


def _gqa_variant(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin, rope="halves", rope_v=False, scale=None,
                 causal=True, tile_kv=False, out_proj=True, split="heads-first"):
    """A GQA layer with switchable mistakes (used to recognise wrong answers)."""
    B, T, _ = x.shape
    hd = w_q.shape[1] // n_heads

    def heads(t, n):                                   # (B, T, n*hd) -> (B, n, T, hd)
        if split == "heads-first":
            return t.view(B, T, n, hd).transpose(1, 2)
        return t.view(B, T, hd, n).permute(0, 3, 1, 2)  # wrong: channels split as (hd, n)

    q, k, v = heads(x @ w_q, n_heads), heads(x @ w_k, n_kv_heads), heads(x @ w_v, n_kv_heads)
    turn = {"halves": _rope_halves, "adjacent": _rope_adjacent, "none": lambda t, c, s: t}[rope]
    q, k = turn(q, cos, sin), turn(k, cos, sin)
    if rope_v:
        v = turn(v, cos, sin)
    n_rep = n_heads // n_kv_heads
    if tile_kv:
        k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
    else:
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    scale = hd ** -0.5 if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale           # (B, H, T, T)
    if causal:
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    z = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, n_heads * hd)   # (B, T, H*hd)
    return z @ w_o if out_proj else z


def _gqa_reference(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin):
    """llmlab's own Attention layer, loaded with the given weights (nn.Linear stores them as (out, in))."""
    from llmlab.attention import Attention, causal_mask
    from llmlab.config import ModelConfig

    d, hd = x.shape[-1], w_q.shape[1] // n_heads
    cfg = ModelConfig(vocab_size=8, d_model=d, n_layers=1, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=hd,
                      d_ff=4)
    layer = Attention(cfg).eval()
    with torch.no_grad():
        for linear, w in [(layer.q_proj, w_q), (layer.k_proj, w_k), (layer.v_proj, w_v), (layer.o_proj, w_o)]:
            linear.weight.copy_(w.T)
        return layer(x, rope=(cos, sin), mask=causal_mask(x.shape[1]), attn_impl="eager")


def check_gqa_attention(fn: Learner) -> str:
    """gqa_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin) -> (B, T, d).

    A causal grouped-query attention layer: x (B, T, d); w_q (d, n_heads*hd), w_k and w_v
    (d, n_kv_heads*hd), w_o (n_heads*hd, d), all used as x @ w; cos and sin (T, hd) are the RoPE
    tables in the split-halves layout (llmlab.positions.rope_cos_sin), applied to q and k.
    """
    from llmlab.positions import rope_cos_sin

    g = generator(37)
    # (B, T, d, n_heads, n_kv_heads, hd): GQA, MQA with n_heads*hd != d (like Gemma), and plain MHA
    shapes = [(1, 5, 12, 6, 2, 4), (2, 4, 8, 4, 1, 6), (1, 3, 8, 2, 2, 4)]
    fn.error_hints = [("must match the size", say("the key/value tensors have n_kv_heads heads and the queries "
                       "n_heads. Repeat each KV head n_heads // n_kv_heads times along the head axis "
                       "(k.repeat_interleave(n_rep, dim=1), or llmlab.attention.repeat_kv) before q @ k^T."))]
    for B, T, d, H, H_kv, hd in shapes:
        x = torch.randn(B, T, d, generator=g)
        w_q, w_o = torch.randn(d, H * hd, generator=g) / d ** 0.5, torch.randn(H * hd, d, generator=g) / d ** 0.5
        w_k, w_v = torch.randn(d, H_kv * hd, generator=g) / d ** 0.5, torch.randn(d, H_kv * hd, generator=g) / d ** 0.5
        cos, sin = rope_cos_sin(T, hd, base=100.0)
        args = (x, w_q, w_k, w_v, w_o, H, H_kv, cos, sin)
        got = fn(*args, names=("x", "w_q", "w_k", "w_v", "w_o", "n_heads", "n_kv_heads", "cos", "sin"))
        expect_tensor(fn, got, _gqa_reference(*args), atol=1e-4, rtol=1e-3, mistakes=[
            (say("the KV heads are repeated in the wrong order: query head h belongs to KV head h // n_rep, so each KV "
             "head must be repeated n_rep times in a row (kv0, kv0, kv1, kv1, ...): repeat_interleave(n_rep, dim=1), "
             "not .repeat(1, n_rep, 1, 1), which tiles them (kv0, kv1, kv0, kv1, ...)."),
             _gqa_variant(*args, tile_kv=True)),
            (say("RoPE is missing: rotate q and k with cos and sin (x * cos + rotate_half(x) * sin) before the scores."),
             _gqa_variant(*args, rope="none")),
            (say("RoPE is in the wrong layout: you rotated adjacent pairs (2j, 2j+1). These weights use the split-halves "
             "layout, which pairs channel j with channel j + head_dim/2 (rotate_half)."),
             _gqa_variant(*args, rope="adjacent")),
            (say("RoPE went on the values too: only queries and keys are rotated; v stays as it is."),
             _gqa_variant(*args, rope_v=True)),
            (say("the scores were not scaled: divide q k^T by sqrt(head_dim) = sqrt({a}) before the softmax.", a=hd),
             _gqa_variant(*args, scale=1.0)),
            (say("you scaled by 1/sqrt(d_model) = 1/sqrt({a}); the scale is 1/sqrt(head_dim) = 1/sqrt({b}), the "
                 "width of one query.", a=d, b=hd), _gqa_variant(*args, scale=d ** -0.5)),
            (say("the causal mask is missing: position i must not see keys j > i (fill -inf above the diagonal "
             "before the softmax)."), _gqa_variant(*args, causal=False)),
            (say("the heads are split the wrong way: view the projection as (B, T, n_heads, head_dim), each head a "
             "contiguous slice of head_dim channels, then transpose to (B, n_heads, T, head_dim)."),
             _gqa_variant(*args, split="channels-first")),
            (say("the output projection is missing: concatenate the heads to (B, T, n_heads*head_dim) and multiply "
             "by w_o, which mixes the heads and maps back to width d."), _gqa_variant(*args, out_proj=False)),
        ])
    return (say("matches llmlab.attention.Attention for GQA (6 query / 2 KV heads), MQA with n_heads*head_dim != d "
            "(like Gemma) and plain MHA, with RoPE and the causal mask."))
