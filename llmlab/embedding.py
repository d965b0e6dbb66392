"""Token embedding: each token id picks one row of a (vocab_size, d_model) matrix.

>>> import torch
>>> table = torch.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])   # vocab 3, d_model 2
>>> embed_tokens(torch.tensor([[2, 1, 2]]), table)                 # (B=1, T=3) -> (1, 3, 2)
tensor([[[3., 4.],
         [1., 2.],
         [3., 4.]]])

Gemma multiplies the looked-up rows by sqrt(d_model), so that they start on the same scale as the
rest of the residual stream; `scale` does that.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def embed_tokens(ids: torch.Tensor, weight: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Rows of `weight` for each id: (B, T) ids -> (B, T, d_model)."""
    x = weight[ids]  # (B, T, d)
    if scale is not None:
        # the scale in the table's own float type, as Gemma's reference code does
        x = x * torch.tensor(scale, dtype=weight.dtype, device=weight.device)
    return x


class TokenEmbedding(nn.Module):
    """The embedding table as a module; its weight is also the LM head when embeddings are tied."""

    def __init__(self, vocab_size: int, d_model: int, scale: float | None = None):
        super().__init__()
        self.weight = nn.Parameter(nn.init.normal_(torch.empty(vocab_size, d_model), std=0.02))
        self.scale = scale

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = F.embedding(ids, self.weight)  # (B, T, d), same rows as embed_tokens, faster kernel
        if self.scale is not None:
            x = x * torch.tensor(self.scale, dtype=x.dtype, device=x.device)
        return x

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}" + (f", scale={self.scale:.4g}" if self.scale else "")
