"""Checks for the position exercises (chapter 4): the sinusoidal table and RoPE."""
from __future__ import annotations

import torch

from llmlab.exercises.compare import expect_tensor
from llmlab.exercises.core import Learner, generator
from llmlab.exercises.messages import say


def _sinusoidal_variant(T, d, exponent="pairs", layout="interleaved", first="sin"):
    pos = torch.arange(T, dtype=torch.float32)[:, None]                        # (T, 1)
    if exponent == "pairs":
        inv_freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)  # (d/2,)
    else:  # the pair index i over d instead of 2i over d
        inv_freq = 10000.0 ** (-torch.arange(0, d // 2, dtype=torch.float32) / d)
    angles = pos * inv_freq                                                    # (T, d/2)
    a, b = (angles.sin(), angles.cos()) if first == "sin" else (angles.cos(), angles.sin())
    if layout == "concat":
        return torch.cat((a, b), dim=-1)                                       # (T, d)
    return torch.stack((a, b), dim=-1).reshape(T, d)                           # (T, d): a0 b0 a1 b1 ...


def check_sinusoidal(fn: Learner) -> str:
    """sinusoidal(T, d) -> (T, d): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same angle)."""
    from llmlab.positions import sinusoidal_encoding as reference

    for T, d in [(3, 4), (10, 8), (50, 16)]:
        got = fn(T, d, names=("T", "d"))
        expect_tensor(fn, got, reference(T, d), atol=1e-4, mistakes=[
            (say("sin and cos are swapped: even channels (0, 2, 4, ...) hold sin, odd channels hold cos. "
             "Row 0 must read (0, 1, 0, 1, ...)."), _sinusoidal_variant(T, d, first="cos")),
            (say("you put all the sines first and then all the cosines (concatenated halves). The 2017 table "
             "interleaves them: channel 2i is sin and channel 2i+1 is cos of the same angle."),
             _sinusoidal_variant(T, d, layout="concat")),
            (say("the frequencies are off: the exponent is 2i/d where i counts channel PAIRS (so use "
             "torch.arange(0, d, 2) / d); you used i/d, which makes every clock too fast."),
             _sinusoidal_variant(T, d, exponent="index")),
        ])
    return say("matches llmlab.positions.sinusoidal_encoding for (T, d) = (3, 4), (10, 8) and (50, 16).")


def _rope_variant(x, base=10000.0, layout="halves", direction=1.0, start=0, exponent="pairs"):
    T, hd = x.shape[-2], x.shape[-1]
    i = torch.arange(0, hd, 2, dtype=torch.float32) if exponent == "pairs" else torch.arange(hd // 2, dtype=torch.float32)
    inv_freq = base ** (-i / hd)                                                # (hd/2,)
    angles = torch.arange(start, start + T, dtype=torch.float32)[:, None] * inv_freq  # (T, hd/2)
    cos, sin = angles.cos(), direction * angles.sin()
    if layout == "halves":
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    else:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    r1, r2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos                           # (..., T, hd/2) each
    if layout == "halves":
        return torch.cat((r1, r2), dim=-1)                                      # (..., T, hd)
    return torch.stack((r1, r2), dim=-1).flatten(-2)                            # (..., T, hd)


def check_rope(fn: Learner) -> str:
    """rope(x, base=10000.0): rotate q or k (B, H, T, head_dim) by position, split-halves layout:
    channel j pairs with channel j + head_dim/2 and turns by angle pos * base^(-2j/head_dim)."""
    from llmlab.positions import apply_rope, rope_cos_sin

    g = generator(17)
    for shape, base in [((1, 1, 3, 4), 10000.0), ((2, 3, 6, 8), 10000.0), ((1, 2, 5, 16), 500.0)]:
        x = torch.randn(*shape, generator=g)
        got = fn(x, base, names=("x", "base"))
        cos, sin = rope_cos_sin(shape[-2], shape[-1], base)
        expect_tensor(fn, got, apply_rope(x, cos, sin), atol=1e-4, mistakes=[
            (say("you rotated neighbouring channels (0, 1), (2, 3), ... together: that is the interleaved layout "
             "of the RoPE paper. llmlab and Hugging Face Llama checkpoints use split halves: channel j pairs "
             "with channel j + head_dim/2 (rotate_half)."), _rope_variant(x, base, layout="interleaved")),
            (say("the rotation goes the wrong way: (x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos); "
             "you have the sign of sin flipped."), _rope_variant(x, base, direction=-1.0)),
            (say("the positions start at 1; the first token is at position 0 (it is not rotated at all)."),
             _rope_variant(x, base, start=1)),
            (say("the frequencies are off: pair j turns at base^(-2j/head_dim) (torch.arange(0, hd, 2) / hd); "
             "you used base^(-j/head_dim)."), _rope_variant(x, base, exponent="index")),
            (say("you ignored the `base` argument: use it instead of a fixed 10000."),
             _rope_variant(x, 10000.0) if base != 10000.0 else None),
        ])
    return say("matches llmlab.positions.apply_rope (split halves) on 3 hidden cases, including base=500.")
