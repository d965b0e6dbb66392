"""Feed-forward network: the same small MLP applied to every position on its own.

Plain MLP (2017, GPT-2): down(act(up(x))). Gated (SwiGLU in Llama/Qwen/Phi, GeGLU in Gemma):
down(act(gate(x)) * up(x)) -- one branch decides how much of the other passes.

>>> import torch
>>> x = torch.tensor([-1.0, 0.0, 1.0])
>>> relu(x), silu(x)
(tensor([0., 0., 1.]), tensor([-0.2689,  0.0000,  0.7311]))
>>> gelu(x), gelu(x, approximate="tanh")
(tensor([-0.1587,  0.0000,  0.8413]), tensor([-0.1588,  0.0000,  0.8412]))
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from llmlab.hooks import HookPoint


def relu(x: torch.Tensor) -> torch.Tensor:
    """max(0, x)."""
    return torch.clamp(x, min=0)


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """x * Phi(x), Phi the standard normal CDF. approximate="tanh" is GPT-2's and Gemma's cheaper formula."""
    if approximate == "tanh":
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def silu(x: torch.Tensor) -> torch.Tensor:
    """x * sigmoid(x), also called swish."""
    return x * torch.sigmoid(x)


# The modules use torch's fused kernels; tests/test_stages.py checks them against the formulas above.
ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
}


class FeedForward(nn.Module):
    """up -> activation -> down, with d_model -> d_ff -> d_model (GPT-2, the 2017 Transformer)."""

    def __init__(self, config):
        super().__init__()
        self.up_proj = nn.Linear(config.d_model, config.d_ff, bias=config.mlp_bias)
        self.down_proj = nn.Linear(config.d_ff, config.d_model, bias=config.mlp_bias)
        self.act = ACTIVATIONS[config.activation]
        self.hook_pre, self.hook_post = HookPoint("B T ff"), HookPoint("B T ff")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.hook_pre(self.up_proj(x))   # (B, T, d_ff)
        h = self.hook_post(self.act(h))      # (B, T, d_ff)
        return self.down_proj(h)             # (B, T, d)


class GatedFeedForward(nn.Module):
    """down(act(gate(x)) * up(x)): SwiGLU with act=silu, GeGLU with act=gelu.

    fused_gate_up=True keeps gate and up in one (2*d_ff, d) matrix, gate rows first (Phi-3).
    """

    def __init__(self, config):
        super().__init__()
        self.fused = config.fused_gate_up
        if self.fused:
            self.gate_up_proj = nn.Linear(config.d_model, 2 * config.d_ff, bias=config.mlp_bias)
        else:
            self.gate_proj = nn.Linear(config.d_model, config.d_ff, bias=config.mlp_bias)
            self.up_proj = nn.Linear(config.d_model, config.d_ff, bias=config.mlp_bias)
        self.down_proj = nn.Linear(config.d_ff, config.d_model, bias=config.mlp_bias)
        self.act = ACTIVATIONS[config.activation]
        self.hook_pre, self.hook_post = HookPoint("B T ff"), HookPoint("B T ff")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)  # 2 x (B, T, d_ff)
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)     # 2 x (B, T, d_ff)
        gate = self.hook_pre(gate)
        h = self.hook_post(self.act(gate) * up)               # (B, T, d_ff)
        return self.down_proj(h)                              # (B, T, d)


def make_ffn(config) -> nn.Module:
    """The feed-forward network the config asks for."""
    return FeedForward(config) if config.ffn == "mlp" else GatedFeedForward(config)
