"""Generation: run the prompt once (prefill), then one token at a time (decode), reusing a KV cache.

    logits = prefill(model, ids, cache)          # the whole prompt in one pass; the cache now holds it
    next   = logits.argmax(-1)                   # (B,)
    logits = decode_step(model, next, cache)     # one new position; attends to everything cached

`generate` wraps the loop with sampling, stop-on-EOS and streaming:

    ids, mask = tok.encode_batch(["Once upon a time", "Hi"])             # left-padded (B, T)
    out = generate(model, ids, 40, attention_mask=mask, eos_token_id=tok.eos_token_id)
"""
from __future__ import annotations

from typing import Callable

import torch

from llmlab.kvcache import GrowingKVCache, StaticKVCache
from llmlab.checks import as_ids, check_attention_mask, check_int, check_number
from llmlab.sampling import apply_repetition_penalty, check_sampling, sample_next_token


def prefill(model, ids: torch.Tensor, cache, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Run the prompt ids (B, T) through the model, filling the cache; return the last logits (B, vocab)."""
    return model(ids, cache=cache, attention_mask=attention_mask, last_only=True)[:, -1]


def decode_step(model, token: torch.Tensor, cache, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Feed one new token per row, (B,) or (B, 1), at the cache's next position; return its logits (B, vocab)."""
    if token.dim() == 1:
        token = token[:, None]  # (B, 1)
    return model(token, cache=cache, attention_mask=attention_mask, last_only=True)[:, -1]


@torch.inference_mode()
def generate(model, ids, max_new_tokens: int, temperature: float | None = None, top_k: int | None = None,
             top_p: float | None = None, seed: int | None = None, use_cache: bool = True,
             eos_token_id: int | list | None = None, stream: Callable | None = None,
             kv_cache: str = "static", attention_mask: torch.Tensor | None = None,
             do_sample: bool | None = None, min_p: float | None = None,
             repetition_penalty: float | None = None) -> torch.Tensor:
    """Continue ids (B, T) by up to max_new_tokens tokens; returns (B, T + new) on the model's device.

    temperature=0 (the default) is greedy; otherwise sample with the given top_k / top_p, reproducibly
    when seed is given. do_sample=True, as in transformers, samples at `temperature` (1.0 unless given).
    min_p keeps the tokens at least min_p times as likely as the top one; repetition_penalty (> 1) makes
    every token already in the row (prompt and new tokens, not padding) less likely, greedy or sampled.
    eos_token_id (one id or several): a row that produced it gets EOS from then on, and generation stops
    when every row has. stream(token) is called for every new token as soon as it
    exists: with an int when B == 1, with a list of B ints otherwise. use_cache=False recomputes the
    whole sequence at every step (the slow way the cache avoids); kv_cache="static" or "growing" picks
    the KV cache class. attention_mask (B, T), 1 = token and 0 = padding, lets a batch of prompts of
    different lengths run together, padded on the left (tokenizer.encode_batch): each row then continues
    as it would alone. ids may live on any device; they are moved to the model's and checked once.
    """
    ids = as_ids(model, None, ids)
    B, T = ids.shape
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, low=0)
    temperature = _temperature(temperature, do_sample)
    check_sampling(temperature, top_k, top_p, min_p)
    if repetition_penalty is not None:
        check_number("repetition_penalty", repetition_penalty, low=0, low_open=True, hint="1.0 changes nothing.")
    if kv_cache not in ("static", "growing"):
        raise ValueError(f"kv_cache={kv_cache!r}: use 'static' (preallocated, fast) or 'growing' (torch.cat, readable).")
    if stream is not None and not callable(stream):
        raise TypeError(f"stream must be a function called with each new token; got {type(stream).__name__}.")
    if T + max_new_tokens > model.config.max_seq_len:
        raise ValueError(f"prompt ({T}) + max_new_tokens ({max_new_tokens}) = {T + max_new_tokens} exceeds the "
                         f"model's context max_seq_len={model.config.max_seq_len}; ask for fewer new tokens.")
    if attention_mask is not None:
        attention_mask = check_attention_mask(attention_mask, B, T, ids.device, left_padded=True).long()
    if max_new_tokens == 0:
        return ids
    generator = None
    if seed is not None:
        generator = torch.Generator(device=ids.device)
        generator.manual_seed(check_int("seed", seed))
    eos = None
    if eos_token_id is not None:
        eos_list = [eos_token_id] if not isinstance(eos_token_id, (list, tuple)) else list(eos_token_id)
        eos_list = [check_int("eos_token_id", e, 0, model.config.vocab_size - 1) for e in eos_list]
        eos = torch.tensor(eos_list, device=ids.device)
    finished = torch.zeros(B, dtype=torch.bool, device=ids.device)

    def grow(mask):  # the new token of every row is real: one more 1 on the right
        return None if mask is None else torch.cat([mask, mask.new_ones(B, 1)], dim=1)  # (B, T_k + 1)

    if use_cache:
        kv = StaticKVCache(model.config.n_layers, T + max_new_tokens) if kv_cache == "static" \
            else GrowingKVCache(model.config.n_layers)
        logits = prefill(model, ids, kv, attention_mask)                      # (B, vocab)
    else:
        logits = model(ids, attention_mask=attention_mask, last_only=True)[:, -1]

    # what the repetition penalty counts as seen: padding stands in as the prompt's last (real) token
    tokens = [ids if attention_mask is None else torch.where(attention_mask.bool(), ids, ids[:, -1:])]
    for step in range(max_new_tokens):
        if repetition_penalty is not None:
            logits = apply_repetition_penalty(logits, torch.cat(tokens, dim=1), repetition_penalty)
        next_token = sample_next_token(logits, temperature, top_k, top_p, generator, min_p)  # (B,)
        if eos is not None:
            next_token = torch.where(finished, eos[0], next_token)  # finished rows keep emitting EOS
            finished |= torch.isin(next_token, eos)
        tokens.append(next_token[:, None])
        if stream is not None:
            stream(int(next_token[0]) if B == 1 else next_token.tolist())
        if step == max_new_tokens - 1 or (eos is not None and bool(finished.all())):
            break
        attention_mask = grow(attention_mask)
        if use_cache:
            logits = decode_step(model, next_token, kv, attention_mask)
        else:
            logits = model(torch.cat([ids, *tokens[1:]], dim=1), attention_mask=attention_mask, last_only=True)[:, -1]
    return torch.cat([ids, *tokens[1:]], dim=1)


def _temperature(temperature, do_sample) -> float:
    """The temperature generate samples at: do_sample (transformers' switch) and temperature must agree."""
    if do_sample not in (None, True, False):
        raise TypeError(f"do_sample must be True or False; got {do_sample!r}.")
    if do_sample is None:
        return 0.0 if temperature is None else temperature
    if do_sample:
        if temperature == 0:
            raise ValueError("do_sample=True with temperature=0 asks for sampling and for greedy decoding; "
                             "give a temperature > 0 (default 1.0) or drop do_sample for greedy.")
        return 1.0 if temperature is None else temperature
    if temperature not in (None, 0):
        raise ValueError(f"do_sample=False is greedy decoding, but temperature={temperature} asks for sampling; "
                         "drop one of them (in llmlab, temperature > 0 alone means sampling).")
    return 0.0
