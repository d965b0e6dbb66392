"""Normalization: keep the residual stream's scale in check before (or after) each sublayer.

LayerNorm (2016) centres each vector and divides by its standard deviation; RMSNorm (2019) skips
the centring and divides by the root mean square. Both then multiply by a learned weight.

>>> import torch
>>> x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
>>> rms_norm(x, torch.ones(4), eps=0.0)            # rms = sqrt((1+4+9+16)/4) = 2.7386
tensor([[0.3651, 0.7303, 1.0954, 1.4606]])
>>> layer_norm(x, torch.ones(4), torch.zeros(4), eps=0.0)   # mean 2.5, std 1.1180
tensor([[-1.3416, -0.4472,  0.4472,  1.3416]])

The statistics are computed in float32 even when the model runs in bf16, as Hugging Face does:
a mean of squares in 8 bits of mantissa loses too much.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, unit_offset: bool = False) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight, over the last dimension.

    unit_offset=True is Gemma's variant: the stored weight w is used as (1 + w), so a zero-initialised
    weight means "no change".
    """
    dtype = x.dtype
    x = x.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    if unit_offset:
        # Gemma multiplies in float32 and rounds once at the end.
        return (x * (1.0 + weight.float())).to(dtype)
    # Llama rounds back to the input dtype first, then multiplies by the weight.
    return weight * x.to(dtype)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float = 1e-5) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias, over the last dimension (biased variance)."""
    dtype = x.dtype
    x = x.float()
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    y = (x - mean) * torch.rsqrt(var + eps)
    y = y * weight.float()
    if bias is not None:
        y = y + bias.float()
    return y.to(dtype)


_HAS_FUSED_RMS_NORM = hasattr(F, "rms_norm")  # torch >= 2.4


class RMSNorm(nn.Module):
    """RMSNorm with a learned per-channel weight (Llama, Qwen2, Phi-3; Gemma with unit_offset=True)."""

    def __init__(self, dim: int, eps: float = 1e-6, unit_offset: bool = False):
        super().__init__()
        self.eps = eps
        self.unit_offset = unit_offset
        # Gemma checkpoints store w with (1 + w) applied at run time, so "identity" is 0 there, 1 elsewhere.
        self.weight = nn.Parameter(torch.zeros(dim) if unit_offset else torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32 and _HAS_FUSED_RMS_NORM:
            # One fused kernel instead of six small ops (it matters when decoding one token at a time);
            # in float32 it is the same formula as rms_norm (tests/test_stages.py checks the two agree).
            weight = 1.0 + self.weight if self.unit_offset else self.weight
            return F.rms_norm(x, (x.shape[-1],), weight, self.eps)
        return rms_norm(x, self.weight, self.eps, self.unit_offset)

    def linear_at(self, h: torch.Tensor):
        """The norm with its divisor frozen at h's value: (scale, f) with scale = 1 / rms(h) and
        f(x) = x * scale * weight, linear in x, f(h) = norm(h). h (..., d) -> scale (..., 1).
        Direct logit attribution splits the output over the parts of h with it."""
        scale = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)      # (..., 1)
        weight = (1.0 + self.weight if self.unit_offset else self.weight).to(h.dtype)
        return scale, lambda x: x * scale * weight

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}" + (", unit_offset=True" if self.unit_offset else "")


class LayerNorm(nn.Module):
    """LayerNorm with weight and (optionally) bias (GPT-2, the 2017 Transformer).

    The forward uses torch's fused kernel; `layer_norm` above is the same formula written out
    (tests/test_stages.py checks that they agree).
    """

    def __init__(self, dim: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)

    def linear_at(self, h: torch.Tensor):
        """The norm without its bias, divisor frozen at h's value: (scale, f) with scale = 1 / std(h) and
        f(x) = (x - mean(x)) * scale * weight (centring is linear too); f(h) + bias = norm(h)."""
        scale = torch.rsqrt(h.var(-1, unbiased=False, keepdim=True) + self.eps)  # (..., 1)
        weight = self.weight.to(h.dtype)
        return scale, lambda x: (x - x.mean(-1, keepdim=True)) * scale * weight

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def make_norm(config, dim: int | None = None) -> nn.Module:
    """The norm the config asks for, over `dim` channels (default d_model)."""
    dim = config.d_model if dim is None else dim
    if config.norm == "rms":
        return RMSNorm(dim, config.norm_eps, config.norm_unit_offset)
    return LayerNorm(dim, config.norm_eps, config.norm_bias)
