"""Checks for the exercises on stored weights (ch. 10b): decode one GGUF Q4_1 block from its bytes,
and quantize a matrix to int8 with one scale per row."""
from __future__ import annotations

import numpy as np
import torch

from llmlab.exercises.compare import expect_tensor
from llmlab.exercises.core import Learner, generator
from llmlab.exercises.results import Mistake
from llmlab.exercises.messages import say


# ----------------------------------------------------------------------------- Q4_1

def q4_1_block(g: torch.Generator, spread: float = 1.0) -> bytes:
    """20 random bytes of a valid Q4_1 block: fp16 d > 0, fp16 m, 16 bytes of packed nibbles."""
    d = np.float16(0.001 + spread * torch.rand(1, generator=g).item() / 15)
    m = np.float16(-8 * float(d) + 0.01 * torch.randn(1, generator=g).item())
    codes = torch.randint(0, 256, (16,), generator=g, dtype=torch.uint8).numpy()
    return np.array([d, m], dtype="<f2").tobytes() + codes.tobytes()


def _fields(block: bytes):
    d, m = (float(v) for v in np.frombuffer(block[:4], dtype="<f2"))
    qs = torch.from_numpy(np.frombuffer(block[4:20], dtype=np.uint8).copy()).long()   # (16,)
    return d, m, qs & 0x0F, qs >> 4                                                  # low, high nibbles


def dequantize_q4_1_reference(block: bytes) -> torch.Tensor:
    """GGUF's order: weight j < 16 is the LOW nibble of byte j, weight 16 + j its HIGH nibble."""
    d, m, low, high = _fields(block)
    return (torch.cat([low, high]).float() * d + m).float()                           # (32,)


def check_dequantize_q4_1(fn: Learner) -> str:
    """dequantize_q4_1(block: bytes) -> FloatTensor (32,): x = d * q + m with GGUF's nibble order."""
    g = generator(101)
    blocks = [q4_1_block(g) for _ in range(5)]
    for block in blocks:
        if not isinstance(block, bytes) or len(block) != 20:  # pragma: no cover - a bug in this check
            raise AssertionError("bad test block")
        got = fn(block, names=("block",))
        d, m, low, high = _fields(block)
        interleaved = torch.stack([low, high], dim=1).reshape(32)    # low, high, low, high, ...
        expect_tensor(fn, got, dequantize_q4_1_reference(block), atol=1e-4, rtol=1e-4, mistakes=[
            (say("nibble order: in GGUF the 16 LOW nibbles (byte & 0x0F) are weights 0-15 and the 16 HIGH "
             "nibbles (byte >> 4) are weights 16-31; you interleaved them (low, high of byte 0, then byte 1...)."),
             interleaved.float() * d + m),
            (say("nibble order: weights 0-15 are the LOW nibbles (byte & 0x0F), weights 16-31 the HIGH ones "
             "(byte >> 4); you put the high nibbles first."), torch.cat([high, low]).float() * d + m),
            (say("you forgot the minimum: Q4_1 stores x = d * q + m; without + m every weight is shifted."),
             torch.cat([low, high]).float() * d),
            (say("the first fp16 number is the scale d, the second the minimum m; you swapped them."),
             torch.cat([low, high]).float() * m + d),
            (say("Q4_1 codes are unsigned (0..15) with a separate minimum m; subtracting 8 is Q4_0's convention."),
             (torch.cat([low, high]).float() - 8) * d + m),
        ])
    return say("decodes 5 Q4_1 blocks exactly as llama.cpp does: d * q + m, low nibbles first.")


# ----------------------------------------------------------------------------- int8 per row

def quantize_int8_rows_reference(w: torch.Tensor):
    from llmlab.quantize import quantize_int8

    return quantize_int8(w)


def check_quantize_int8_rows(fn: Learner) -> str:
    """quantize_int8_rows(w) -> (q int8 (out, in), scale (out,)) with scale = max|w_row| / 127 and
    q = round(w / scale), so that w ~ q * scale[:, None]."""
    g = generator(103)
    shapes = [(4, 6), (3, 16), (8, 5)]
    for out_f, in_f in shapes:
        w = torch.randn(out_f, in_f, generator=g) * torch.logspace(-2, 0, out_f)[:, None]   # rows of very different size
        got = fn(w, names=("w",))
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise Mistake(say("{a} returned {b}; expected a pair (q, scale): q the int8 codes (out, in), scale one float per "
                              "row (out,).", a=fn.last_call, b=type(got).__name__))
        q, scale = got
        want_q, want_s = quantize_int8_rows_reference(w)
        if isinstance(scale, torch.Tensor) and scale.numel() == 1 and out_f > 1:
            raise Mistake(say("{a} returned a single scale; expected one per row, shape ({b},).\nHint: per-tensor instead of "
                              "per-row: take the max over each row (w.abs().amax(dim=1)), so that a row of small weights gets "
                              "a small scale.", a=fn.last_call, b=out_f))
        if isinstance(scale, torch.Tensor) and tuple(scale.shape) == (in_f,) and in_f != out_f:
            raise Mistake(say("{a} returned scale of shape {b}: one per COLUMN.\nHint: one scale per output row: reduce over "
                              "dim=1 (the input dimension).", a=fn.last_call, b=tuple(scale.shape)))
        per_tensor = w.abs().max() / 127
        expect_tensor(fn, scale, want_s, atol=1e-7, rtol=1e-5, what=say("the scale"), mistakes=[
            (say("per-tensor instead of per-row: every row got the scale of the largest weight in the whole matrix; "
             "reduce over each row instead (w.abs().amax(dim=1) / 127)."), per_tensor.expand(out_f)),
            (say("the scale maps the row's largest |w| to 127 (not 128, not 255): scale = max|w_row| / 127."),
             w.abs().amax(dim=1) / 128),
            (say("the scale maps the row's largest |w| to 127 (not 128, not 255): scale = max|w_row| / 127."),
             w.abs().amax(dim=1) / 255),
            (say("use the largest ABSOLUTE value of the row (w.abs().amax(dim=1)): a row whose biggest weight is "
             "negative needs that size too."), w.amax(dim=1).clamp(min=1e-12) / 127),
        ])
        ratio = w / want_s[:, None]
        expect_tensor(fn, q, want_q, what=say("the codes q"), mistakes=[
            (say("rounding vs truncation: .to(torch.int8) (or int()) cuts towards zero; round first "
             "(torch.round(w / scale)), which halves the worst error."), ratio.trunc().to(torch.int8)),
            (say("rounding vs truncation: floor() always rounds down; use torch.round(w / scale)."),
             ratio.floor().clamp(-127, 127).to(torch.int8)),
            (say("the codes must be w / scale (rounded); you multiplied by the scale."),
             (w * want_s[:, None]).round().clamp(-127, 127).to(torch.int8)),
        ])
    return (say("per-row scales max|w_row| / 127 and rounded int8 codes on 3 matrices whose rows differ "
            "in size by 100x."))
