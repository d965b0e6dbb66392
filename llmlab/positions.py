"""Positions: attention by itself does not know token order, so order has to be put in.

Four ways, in historical order:
- sinusoidal (2017): add fixed sin/cos waves of many frequencies to the embeddings;
- learned (GPT-2): add a trained vector per position;
- RoPE (2021, Llama, Qwen, Gemma, Phi): rotate each query and key by an angle proportional to its
  position, so the q.k score depends only on the distance between the two tokens;
- ALiBi (2022): add -slope * distance to the attention scores.

>>> sinusoidal_encoding(2, 4)           # position 0 is (sin 0, cos 0, sin 0, cos 0)
tensor([[0.0000, 1.0000, 0.0000, 1.0000],
        [0.8415, 0.5403, 0.0100, 0.9999]])
>>> alibi_slopes(4)
tensor([0.2500, 0.0625, 0.0156, 0.0039])
"""
from __future__ import annotations

import math

import torch
from torch import nn


# ---------------------------------------------------------------- sinusoidal and learned (added to x)

def sinusoidal_encoding(T: int, d: int, base: float = 10000.0, device=None) -> torch.Tensor:
    """The 2017 table: PE[pos, 2i] = sin(pos / base^(2i/d)), PE[pos, 2i+1] = cos(pos / base^(2i/d)).

    Returns (T, d). Each pair of channels is a clock ticking at its own speed; low channels tick fast.
    """
    pos = torch.arange(T, dtype=torch.float32, device=device)[:, None]           # (T, 1)
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float32, device=device) / d)  # (d/2,)
    angles = pos * inv_freq                                                        # (T, d/2)
    pe = torch.zeros(T, d, device=device)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


class LearnedPositionalEmbedding(nn.Module):
    """GPT-2's table of one trained vector per position: (max_seq_len, d_model)."""

    def __init__(self, max_seq_len: int, d_model: int):
        super().__init__()
        self.weight = nn.Parameter(nn.init.normal_(torch.empty(max_seq_len, d_model), std=0.01))

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.weight[positions]  # (..., T, d)


# ---------------------------------------------------------------- RoPE (rotates q and k)

def rope_inv_freq(rotary_dim: int, base: float = 10000.0, scaling: dict | None = None) -> torch.Tensor:
    """The rotation speed of each channel pair: base^(-2i/rotary_dim), i = 0 .. rotary_dim/2 - 1.

    scaling={"rope_type": "llama3", ...} slows the low frequencies down (Llama 3.1's long-context trick):
    pairs whose wavelength is longer than original_max_position_embeddings / low_freq_factor turn
    `factor` times slower, pairs shorter than .../high_freq_factor stay, the ones in between blend.
    scaling={"rope_type": "linear", "factor": f} slows every pair down by f.
    """
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.float32, device="cpu") / rotary_dim
    inv_freq = 1.0 / (base ** exponents)  # (rd/2,)
    if scaling is None:
        return inv_freq
    if scaling["rope_type"] == "linear":
        return inv_freq / scaling["factor"]
    factor = scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_len = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)          # 0 at the long end, 1 at the short end
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    in_between = ~(wavelen < old_len / high) * ~(wavelen > old_len / low)
    return torch.where(in_between, blended, scaled)


def rope_cos_sin(T: int, head_dim: int, base: float = 10000.0, device=None, scaling: dict | None = None,
                 start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of angle = position * inv_freq for positions start .. start+T-1.

    Returns two (T, head_dim) tensors in the split-halves layout: columns j and j + head_dim/2 share
    one angle, because `rotate_half` pairs channel j with channel j + head_dim/2.
    """
    inv_freq = rope_inv_freq(head_dim, base, scaling).to(device)
    pos = torch.arange(start, start + T, device=device).float()
    freqs = pos[:, None] * inv_freq[None, :]   # (T, hd/2)
    emb = torch.cat((freqs, freqs), dim=-1)    # (T, hd)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension: a 90 degree turn of each pair."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate every (x_j, x_{j+hd/2}) pair of x (..., T, head_dim) by its angle.

    If cos is narrower than x (partial RoPE), only the first cos.shape[-1] channels turn.
    >>> x = torch.tensor([[1.0, 0.0]])                       # one position, head_dim 2
    >>> cos, sin = torch.tensor([[0.0, 0.0]]), torch.tensor([[1.0, 1.0]])   # angle 90 degrees
    >>> apply_rope(x, cos, sin)
    tensor([[0., 1.]])
    """
    rd = cos.shape[-1]
    if rd < x.shape[-1]:
        x_rot, x_pass = x[..., :rd], x[..., rd:]
        return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)
    return x * cos + rotate_half(x) * sin


class RotaryEmbedding(nn.Module):
    """Hands out cos/sin tables for given positions, computing them once and reusing them.

    The tables only depend on the positions, so they are built for a block of positions, cached per
    (device, dtype), and sliced at every step. Decoding one token then costs a slice, not a sin().
    """

    def __init__(self, rotary_dim: int, base: float = 10000.0, scaling: dict | None = None):
        super().__init__()
        self.rotary_dim, self.base, self.scaling = rotary_dim, base, scaling
        # Kept as a plain float32 tensor, not a buffer: model.to(bfloat16) must not round the frequencies.
        self.inv_freq = rope_inv_freq(rotary_dim, base, scaling)
        self._tables: dict = {}

    def tables(self, length: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin for positions 0 .. at least length-1, each (L, rotary_dim)."""
        key = (torch.device(device), dtype)
        cached = self._tables.get(key)
        if cached is None or cached[0].shape[0] < length:
            n = max(length, 256, 2 * cached[0].shape[0] if cached is not None else 0)
            # Built as ordinary tensors even inside generate's inference_mode: an inference tensor kept
            # here would break a later forward pass that records gradients.
            with torch.inference_mode(False), torch.no_grad():
                pos = torch.arange(n, device=device).float()
                freqs = pos[:, None] * self.inv_freq.to(device)[None, :]  # (n, rd/2)
                emb = torch.cat((freqs, freqs), dim=-1)                    # (n, rd)
                cached = (emb.cos().to(dtype), emb.sin().to(dtype))
            self._tables[key] = cached
        return cached

    def forward(self, start: int, T: int, device, dtype, position_ids: torch.Tensor | None = None):
        """cos, sin for positions start .. start+T-1: (T, rd).

        With explicit position_ids (B, T) (e.g. left padding): (B, 1, T, rd), broadcast over heads.
        position_ids (T,) give the same positions to every row: (T, rd).
        """
        if position_ids is None:
            cos, sin = self.tables(start + T, device, dtype)
            return cos[start:start + T], sin[start:start + T]
        if not isinstance(position_ids, torch.Tensor) or position_ids.is_floating_point() \
                or position_ids.dim() not in (1, 2) or position_ids.shape[-1] != T:
            shape = tuple(position_ids.shape) if isinstance(position_ids, torch.Tensor) else type(position_ids).__name__
            raise ValueError(f"position_ids must be an integer tensor of shape (batch, {T}) or ({T},), one position "
                             f"per new token; got {shape}.")
        position_ids = position_ids.to(device)
        length = start + T
        if position_ids.device.type != "meta":
            lo, length = int(position_ids.min()), max(length, int(position_ids.max()) + 1)
            if lo < 0:
                raise ValueError(f"position_ids must be >= 0; got {lo}.")
        cos, sin = self.tables(length, device, dtype)
        if position_ids.dim() == 1:
            return cos[position_ids], sin[position_ids]              # (T, rd)
        return cos[position_ids][:, None], sin[position_ids][:, None]  # (B, 1, T, rd), broadcast over heads

    def extra_repr(self) -> str:
        return f"rotary_dim={self.rotary_dim}, base={self.base}" + (f", scaling={self.scaling}" if self.scaling else "")


# ---------------------------------------------------------------- ALiBi (added to the scores)

def alibi_slopes(n_heads: int) -> torch.Tensor:
    """One slope per head, a geometric sequence starting at 2^(-8/n): for 4 heads 1/4, 1/16, 1/64, 1/256.

    For head counts that are not a power of two, the ALiBi paper takes the slopes of the nearest lower
    power of two and fills up with every other slope of the next power of two.
    """
    def power_of_two_slopes(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    m = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_two_slopes(m)
    if m < n_heads:
        slopes += power_of_two_slopes(2 * m)[0::2][: n_heads - m]
    return torch.tensor(slopes, device="cpu")


def alibi_bias(n_heads: int, T: int, device=None, start: int = 0) -> torch.Tensor:
    """(n_heads, T, start + T) score bias: slope_h * (j - i), i.e. -slope * distance to the keys in the past.

    Queries are positions start .. start+T-1 (start > 0 after a KV cache), keys 0 .. start+T-1.
    Entries above the diagonal (the future) come out positive but the causal mask removes them.
    """
    q_pos = torch.arange(start, start + T, device=device)
    k_pos = torch.arange(start + T, device=device)
    distance = k_pos[None, :] - q_pos[:, None]                              # (T, T_k): j - i
    return alibi_slopes(n_heads).to(device)[:, None, None] * distance[None]  # (H, T, T_k)
