"""Choosing the next token from the logits.

temperature divides the logits (below 1: sharper, above 1: flatter; 0 means always the top token),
top-k keeps the k highest logits, top-p keeps the smallest set of tokens whose probabilities add up
to at least p. Whatever is removed gets logit -inf, i.e. probability 0.

>>> import torch
>>> logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
>>> top_k_filter(logits, 2)
tensor([[2., 1., -inf, -inf]])
>>> torch.softmax(logits, -1)                # the top token alone has 0.61, the top two 0.83
tensor([[0.6095, 0.2242, 0.1360, 0.0303]])
>>> top_p_filter(logits, 0.8)
tensor([[2., 1., -inf, -inf]])
"""
from __future__ import annotations

import torch


def top_k_filter(logits: torch.Tensor, k: int | None) -> torch.Tensor:
    """Keep the k largest logits of each row (ties with the k-th are kept too), set the rest to -inf."""
    if k is None or k >= logits.shape[-1]:
        return logits
    if k < 1:
        raise ValueError(f"top_k must be a positive integer (or None for no filter); got {k}.")
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (B, 1), the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float | None) -> torch.Tensor:
    """Keep the most likely tokens until their probabilities reach p (always at least one), -inf the rest."""
    if p is None or p >= 1.0:
        return logits
    if p <= 0:
        raise ValueError(f"top_p must be in (0, 1] (or None for no filter); got {p}.")
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (B, V)
    probs = torch.softmax(sorted_logits.float(), dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs                   # probability of the better tokens
    drop_sorted = mass_before >= p                               # p already reached without this token
    drop = drop_sorted.scatter(-1, order, drop_sorted)           # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def sample_next_token(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """logits (B, vocab) -> next token ids (B,). temperature=0 is greedy (argmax)."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy); got {temperature}.")
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = top_p_filter(top_k_filter(logits.float() / temperature, top_k), top_p)
    probs = torch.softmax(logits, dim=-1)                                         # (B, V)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B,)
