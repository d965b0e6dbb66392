"""Choosing the next token from the logits.

temperature divides the logits (below 1: sharper, above 1: flatter; 0 means always the top token),
top-k keeps the k highest logits, top-p keeps the smallest set of tokens whose probabilities add up
to at least p, min-p keeps the tokens at least min_p times as likely as the top one. Whatever is
removed gets logit -inf, i.e. probability 0. A repetition penalty makes tokens already in the text
less likely. (Beam search, which keeps the few most likely continuations instead of one, is a decode
loop: it lives beside generate, in llmlab.generation.)

>>> import torch
>>> logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
>>> top_k_filter(logits, 2)
tensor([[2., 1., -inf, -inf]])
>>> torch.softmax(logits, -1)                # the top token alone has 0.61, the top two 0.83
tensor([[0.6095, 0.2242, 0.1360, 0.0303]])
>>> top_p_filter(logits, 0.8)
tensor([[2., 1., -inf, -inf]])
>>> min_p_filter(logits, 0.3)                # keeps tokens with at least 0.3 x 0.61 = 0.18
tensor([[2., 1., -inf, -inf]])
>>> apply_repetition_penalty(logits, torch.tensor([[0, 3]]), 2.0)   # tokens 0 and 3 were seen
tensor([[ 1.0000,  1.0000,  0.5000, -2.0000]])
"""
from __future__ import annotations

import numpy as np
import torch

from llmlab.checks import check_int, check_number


def check_sampling(temperature, top_k, top_p, min_p=None) -> None:
    """Raise a clear error for sampling settings that would otherwise filter nothing or crash in torch."""
    check_number("temperature", temperature, low=0, hint="0 means greedy; 1 samples the model's own distribution.")
    if min_p is not None:
        check_number("min_p", min_p, low=0, high=1, hint="min_p keeps tokens at least min_p times as likely as the "
                     "top token (0.05-0.1 is usual; None: no filter).")
    if top_k is not None:
        check_int("top_k", top_k, low=1, hint="top_k keeps the k most likely tokens (None: no filter).")
    if top_p is not None:
        check_number("top_p", top_p, low=0, high=1, low_open=True,
                     hint="top_p keeps the most likely tokens until their probabilities add up to p (None: no filter).")


def top_k_filter(logits: torch.Tensor, k: int | None) -> torch.Tensor:
    """Keep the k largest logits of each row (ties with the k-th are kept too), set the rest to -inf."""
    if k is None:
        return logits
    k = check_int("top_k", k, low=1, hint="top_k keeps the k most likely tokens (None: no filter).")
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (B, 1), the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float | None) -> torch.Tensor:
    """Keep the most likely tokens until their probabilities reach p (always at least one), -inf the rest."""
    if p is None:
        return logits
    p = check_number("top_p", p, low=0, high=1, low_open=True, hint="None means no filter.")
    if p == 1.0:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (B, V)
    probs = torch.softmax(sorted_logits.float(), dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs                   # probability of the better tokens
    drop_sorted = mass_before >= p                               # p already reached without this token
    drop = drop_sorted.scatter(-1, order, drop_sorted)           # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def min_p_filter(logits: torch.Tensor, min_p: float | None) -> torch.Tensor:
    """Keep the tokens whose probability is at least min_p times the top token's; -inf the rest.

    The cut follows the model's confidence: a sure model (top token 0.9) keeps few tokens, an unsure
    one (top token 0.1) keeps many, which a fixed top-k cannot do.
    """
    if min_p is None:
        return logits
    min_p = check_number("min_p", min_p, low=0, high=1, hint="None means no filter.")
    # p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p)   (softmax shares its denominator)
    floor = logits.amax(dim=-1, keepdim=True) + torch.log(torch.tensor(min_p, dtype=torch.float32))  # (B, 1)
    return logits.masked_fill(logits < floor.to(logits.dtype), float("-inf"))


def apply_repetition_penalty(logits: torch.Tensor, previous: torch.Tensor, penalty: float) -> torch.Tensor:
    """Make every token that occurs in `previous` (B, T) less likely: its logit is divided by `penalty`
    if positive, multiplied by it if negative (the rule of Keskar et al., 2019, CTRL). 1.0 changes nothing."""
    penalty = check_number("repetition_penalty", penalty, low=0, low_open=True,
                           hint="1.0 changes nothing; 1.1-1.3 is usual; below 1 would favour repeats.")
    if previous.dim() != 2 or previous.shape[0] != logits.shape[0]:
        raise ValueError(f"previous must be the token ids so far, (B, T) with B = {logits.shape[0]} like the logits; "
                         f"got shape {tuple(previous.shape)}.")
    seen = torch.zeros_like(logits, dtype=torch.bool).scatter_(1, previous.to(logits.device), True)   # (B, V)
    penalised = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(seen, penalised, logits)


def sample_next_token(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None,
                      min_p: float | None = None) -> torch.Tensor:
    """logits (B, vocab) -> next token ids (B,). temperature=0 is greedy (argmax)."""
    check_sampling(temperature, top_k, top_p, min_p)
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = min_p_filter(top_p_filter(top_k_filter(logits.float() / temperature, top_k), top_p), min_p)
    probs = torch.softmax(logits, dim=-1)                                         # (B, V)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B,)


def filtered_probs(logits, temperature: float, top_k: int = 0, top_p: float = 1.0):
    """The probabilities sampling draws from after temperature, top-k and top-p, for one row of logits.

    Returns (probs, keep): numpy arrays over the given logits (a list, numpy array or tensor of n).
    temperature 0 puts all mass on the top token. top_k = 0 and top_p = 1 mean "no filter" (the
    off positions of a slider).

    >>> probs, keep = filtered_probs([2.0, 1.0, 0.5, -1.0], temperature=1.0, top_k=2)
    >>> probs.round(3).tolist(), keep.tolist()
    ([0.731, 0.269, 0.0, 0.0], [True, True, False, False])
    """
    check_sampling(temperature, top_k or None, top_p)
    if isinstance(logits, torch.Tensor):
        logits = logits.detach().cpu()
    logits = torch.as_tensor(np.asarray(logits, dtype=np.float64))[None]  # (1, n)
    if temperature == 0:
        probs = torch.zeros_like(logits)
        probs[0, logits.argmax()] = 1.0
    else:
        probs = torch.softmax(top_p_filter(top_k_filter(logits / temperature, top_k or None), top_p), dim=-1)
    probs = probs[0].numpy()
    return probs, probs > 0
