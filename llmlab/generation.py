"""Generation: run the prompt once (prefill), then one token at a time (decode), reusing a KV cache.

    logits = prefill(model, ids, cache)          # the whole prompt in one pass; the cache now holds it
    next   = logits.argmax(-1)                   # (B,)
    logits = decode_step(model, next, cache)     # one new position; attends to everything cached

`generate` wraps the loop with sampling, stop-on-EOS and streaming.
"""
from __future__ import annotations

from typing import Callable

import torch

from llmlab.kvcache import GrowingKVCache, StaticKVCache
from llmlab.model import check_ids
from llmlab.sampling import sample_next_token


def prefill(model, ids: torch.Tensor, cache) -> torch.Tensor:
    """Run the prompt ids (B, T) through the model, filling the cache; return the last logits (B, vocab)."""
    return model(ids, cache=cache, last_only=True)[:, -1]


def decode_step(model, token: torch.Tensor, cache) -> torch.Tensor:
    """Feed one new token per row, (B,) or (B, 1), at the cache's next position; return its logits (B, vocab)."""
    if token.dim() == 1:
        token = token[:, None]  # (B, 1)
    return model(token, cache=cache, last_only=True)[:, -1]


def _as_ids(ids, model) -> torch.Tensor:
    if isinstance(ids, (list, tuple)):
        if len(ids) and isinstance(ids[0], (list, tuple)):
            ids = torch.tensor(ids, dtype=torch.long, device=model.device)
        else:
            ids = torch.tensor([list(ids)], dtype=torch.long, device=model.device)
    check_ids(ids, model)
    return ids


@torch.inference_mode()
def generate(model, ids, max_new_tokens: int, temperature: float = 0.0, top_k: int | None = None,
             top_p: float | None = None, seed: int | None = None, use_cache: bool = True,
             eos_token_id: int | list | None = None, stream: Callable | None = None,
             cache: str = "static") -> torch.Tensor:
    """Continue ids (B, T) by up to max_new_tokens tokens; returns (B, T + new) on the model's device.

    temperature=0 is greedy; otherwise sample with the given top_k / top_p, reproducibly when seed is
    given. eos_token_id (one id or several): a row that produced it gets EOS from then on, and
    generation stops when every row has. stream(token) is called for every new token as soon as it
    exists: with an int when B == 1, with a list of B ints otherwise. use_cache=False recomputes the
    whole sequence at every step (the slow way the cache avoids); cache="static" or "growing" picks
    the cache class.
    """
    ids = _as_ids(ids, model)
    B, T = ids.shape
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0; got {max_new_tokens}.")
    if T + max_new_tokens > model.config.max_seq_len:
        raise ValueError(f"prompt ({T}) + max_new_tokens ({max_new_tokens}) = {T + max_new_tokens} exceeds the "
                         f"model's context max_seq_len={model.config.max_seq_len}; ask for fewer new tokens.")
    if max_new_tokens == 0:
        return ids
    generator = None
    if seed is not None:
        generator = torch.Generator(device=ids.device)
        generator.manual_seed(seed)
    eos = None
    if eos_token_id is not None:
        eos = torch.tensor([eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id), device=ids.device)
    finished = torch.zeros(B, dtype=torch.bool, device=ids.device)

    if use_cache:
        if cache not in ("static", "growing"):
            raise ValueError(f"cache={cache!r}: use 'static' (preallocated, fast) or 'growing' (torch.cat, readable).")
        kv = StaticKVCache(model.config.n_layers, T + max_new_tokens) if cache == "static" \
            else GrowingKVCache(model.config.n_layers)
        logits = prefill(model, ids, kv)                      # (B, vocab)
    else:
        logits = model(ids, last_only=True)[:, -1]

    tokens = [ids]
    for step in range(max_new_tokens):
        next_token = sample_next_token(logits, temperature, top_k, top_p, generator)  # (B,)
        if eos is not None:
            next_token = torch.where(finished, eos[0], next_token)  # finished rows keep emitting EOS
            finished |= torch.isin(next_token, eos)
        tokens.append(next_token[:, None])
        if stream is not None:
            stream(int(next_token[0]) if B == 1 else next_token.tolist())
        if step == max_new_tokens - 1 or (eos is not None and bool(finished.all())):
            break
        if use_cache:
            logits = decode_step(model, next_token, kv)
        else:
            logits = model(torch.cat(tokens, dim=1), last_only=True)[:, -1]
    return torch.cat(tokens, dim=1)
