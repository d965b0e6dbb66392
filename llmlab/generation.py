"""Generation: run the prompt once (prefill), then one token at a time (decode), reusing a KV cache.

    logits = prefill(model, ids, cache)          # the whole prompt in one pass; the cache now holds it
    next   = logits.argmax(-1)                   # (B,)
    logits = decode_step(model, next, cache)     # one new position; attends to everything cached

`generate` wraps the loop with sampling, stop-on-EOS and streaming; it can also continue from a cache
that already holds the start of the ids (a shared system prompt run once):

    ids, mask = tok.encode_batch(["Once upon a time", "Hi"])             # left-padded (B, T)
    out = generate(model, ids, 40, attention_mask=mask, eos_token_id=tok.eos_token_id)
    out = generate(model, prefix_and_question, 40, kv_cache=shared.copy())   # runs only the question

`beam_search` keeps several continuations instead of one. Every decode loop of llmlab (these two and
llmlab.lookup.generate_lookup) checks the context length with `check_context_length` and reads its
EOS ids with `eos_ids`.
"""
from __future__ import annotations

from typing import Callable

import torch

from llmlab.kvcache import GrowingKVCache, StaticKVCache
from llmlab.checks import as_ids, check_attention_mask, check_int, check_number
from llmlab.progress import prefill_progress
from llmlab.sampling import apply_repetition_penalty, check_sampling, sample_next_token


def check_context_length(model, prompt_len: int, max_new_tokens: int) -> None:
    """Raise a clear error when the prompt and the new tokens would not fit in the model's context.

    >>> from llmlab import ModelConfig, Transformer
    >>> check_context_length(Transformer(ModelConfig.preset("tiny-llama")), 60, 10)   # max_seq_len 64
    Traceback (most recent call last):
    ...
    ValueError: prompt (60) + max_new_tokens (10) = 70 exceeds the model's context max_seq_len=64; ask for fewer new tokens.
    """
    if prompt_len + max_new_tokens > model.config.max_seq_len:
        raise ValueError(f"prompt ({prompt_len}) + max_new_tokens ({max_new_tokens}) = {prompt_len + max_new_tokens} "
                         f"exceeds the model's context max_seq_len={model.config.max_seq_len}; ask for fewer new tokens.")


def eos_ids(eos_token_id, vocab_size: int) -> list[int]:
    """The ids that end a text, as a list: None -> [], one id -> [id], a list / tuple / set / tensor -> its ids.

    Each id is checked against the vocabulary; repeats are dropped (the order is kept, a set is sorted).

    >>> eos_ids(None, 100), eos_ids(2, 100), eos_ids([2, 7, 2], 100), eos_ids(torch.tensor([7, 2]), 100)
    ([], [2], [2, 7], [7, 2])
    """
    if eos_token_id is None:
        return []
    if isinstance(eos_token_id, torch.Tensor):
        if eos_token_id.dim() > 1 or eos_token_id.is_floating_point():
            raise ValueError(f"eos_token_id as a tensor must hold integer ids, 0-D or 1-D; got shape "
                             f"{tuple(eos_token_id.shape)}, {eos_token_id.dtype}.")
        eos_token_id = eos_token_id.tolist()
    if isinstance(eos_token_id, (set, frozenset)):
        eos_token_id = sorted(eos_token_id)
    many = eos_token_id if isinstance(eos_token_id, (list, tuple)) else [eos_token_id]
    if not many:
        raise ValueError("eos_token_id is empty; give None for no end-of-text id, or the id(s) that end a text "
                         "(tokenizer.eos_token_id).")
    hint = "Give one id, a list of ids (e.g. tokenizer.eos_token_id) or None."
    checked = [check_int("eos_token_id", e, 0, vocab_size - 1, hint=hint) for e in many]
    return list(dict.fromkeys(checked))


def prefill(model, ids: torch.Tensor, cache, attention_mask: torch.Tensor | None = None,
            progress: bool | None = None) -> torch.Tensor:
    """Run the prompt ids (B, T) through the model, filling the cache; return the last logits (B, vocab).

    A long prompt on the CPU (B * T >= llmlab.progress.LONG_PREFILL_TOKENS) shows its progress block by
    block on stderr; progress=False never shows it, True always. It only watches: the logits are the same.
    """
    with prefill_progress(model, ids.numel() if isinstance(ids, torch.Tensor) else 0, progress):
        return model(ids, cache=cache, attention_mask=attention_mask, logits_to_keep=1)[:, -1]


def decode_step(model, token: torch.Tensor, cache, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Feed one new token per row, (B,) or (B, 1), at the cache's next position; return its logits (B, vocab)."""
    if token.dim() == 1:
        token = token[:, None]  # (B, 1)
    return model(token, cache=cache, attention_mask=attention_mask, logits_to_keep=1)[:, -1]


@torch.inference_mode()
def generate(model, ids, max_new_tokens: int, temperature: float | None = None, top_k: int | None = None,
             top_p: float | None = None, seed: int | None = None, use_cache: bool = True,
             eos_token_id=None, stream: Callable | None = None, kv_cache="static",
             attention_mask: torch.Tensor | None = None, do_sample: bool | None = None,
             min_p: float | None = None, repetition_penalty: float | None = None,
             progress: bool | None = None) -> torch.Tensor:
    """Continue ids (B, T) by up to max_new_tokens tokens; returns (B, T + new) on the model's device.

    temperature=None (the default) or 0 is greedy; a temperature > 0 samples, with the given top_k /
    top_p, reproducibly when seed is given. do_sample=True, as in transformers, samples at `temperature`
    (1.0 unless given). min_p keeps the tokens at least min_p times as likely as the top one;
    repetition_penalty (> 1) makes every token already in the row (prompt and new tokens, not padding)
    less likely, greedy or sampled.
    eos_token_id (None, one id, or several as a list / tuple / tensor): a row that produced any of them gets
    EOS from then on, and generation stops when every row has. stream(token) is called for every new token
    as soon as it exists: with an int when B == 1, with a list of B ints otherwise; a stop token (an id of
    eos_token_id) is not streamed, so a printed stream shows no <|im_end|> (B == 1: no call for it; B > 1:
    None for a row that has stopped, and no call once every row has). The returned ids keep it. use_cache=False
    recomputes the whole sequence at every step (the slow way the cache avoids). A long prompt on the CPU
    shows the progress of its first pass (see prefill); progress=False hides it, True always shows it.
    kv_cache="static" or "growing" picks the class of a new KV cache. kv_cache=<a cache> continues from a
    cache that already holds the first P tokens of ids (prompt caching: a shared prefix run once): only
    ids[:, P:] go through the model, and the cache is extended in place, so pass cache.copy() to keep the
    original. A cache cannot tell which tokens it holds: ids must start with exactly those P tokens.
    attention_mask (B, T), 1 = token and 0 = padding, lets a batch of prompts of different lengths run
    together, padded on the left (tokenizer.encode_batch): each row then continues as it would alone.
    ids may live on any device; they are moved to the model's and checked once.

    >>> from llmlab import ModelConfig, Transformer
    >>> from llmlab.kvcache import GrowingKVCache
    >>> model = Transformer(ModelConfig.preset("tiny-llama")).eval()
    >>> ids = torch.tensor([[1, 2, 3, 4, 5]])
    >>> shared = GrowingKVCache(model.config.n_layers)
    >>> _ = prefill(model, ids[:, :3], shared)                   # the shared prefix, once
    >>> out = generate(model, ids, 4, kv_cache=shared.copy())    # runs ids[:, 3:] only
    >>> torch.equal(out, generate(model, ids, 4)), shared.seq_len
    (True, 3)
    """
    ids = as_ids(model, None, ids)
    B, T = ids.shape
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, low=0)
    temperature = sampling_temperature(temperature, top_k, top_p, min_p, repetition_penalty, do_sample)
    if stream is not None and not callable(stream):
        raise TypeError(f"stream must be a function called with each new token; got {type(stream).__name__}.")
    check_context_length(model, T, max_new_tokens)
    given_cache = not isinstance(kv_cache, str)
    if given_cache:
        if not use_cache:
            raise ValueError("use_cache=False recomputes everything and uses no cache, but kv_cache= gave one; "
                             "drop one of the two.")
        _check_given_cache(model, kv_cache, B, T, max_new_tokens)
    elif kv_cache not in ("static", "growing"):
        raise ValueError(f"kv_cache={kv_cache!r}: use 'static' (preallocated, fast), 'growing' (torch.cat, "
                         "readable) or a cache object that holds the start of ids.")
    if attention_mask is not None:
        attention_mask = check_attention_mask(attention_mask, B, T, ids.device, left_padded=True).long()
    eos = eos_ids(eos_token_id, model.config.vocab_size)
    eos = torch.tensor(eos, device=ids.device) if eos else None
    if max_new_tokens == 0:
        return ids
    generator = seeded_generator(seed, ids.device)
    finished = torch.zeros(B, dtype=torch.bool, device=ids.device)

    def grow(mask):  # the new token of every row is real: one more 1 on the right
        return None if mask is None else torch.cat([mask, mask.new_ones(B, 1)], dim=1)  # (B, T_k + 1)

    if given_cache:
        kv = kv_cache
        if kv.seq_len == T:          # the cache holds all of ids: run the last token again for its logits
            kv.crop(T - 1)
        logits = prefill(model, ids[:, kv.seq_len:], kv, attention_mask, progress)   # only the uncached suffix
    elif use_cache:
        kv = StaticKVCache(model.config.n_layers, T + max_new_tokens) if kv_cache == "static" \
            else GrowingKVCache(model.config.n_layers)
        logits = prefill(model, ids, kv, attention_mask, progress)            # (B, vocab)
    else:
        with prefill_progress(model, ids.numel(), progress):
            logits = model(ids, attention_mask=attention_mask, logits_to_keep=1)[:, -1]

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
            _stream(stream, next_token, finished if eos is not None else None)
        if step == max_new_tokens - 1 or (eos is not None and bool(finished.all())):
            break
        attention_mask = grow(attention_mask)
        if use_cache:
            logits = decode_step(model, next_token, kv, attention_mask)
        else:
            logits = model(torch.cat([ids, *tokens[1:]], dim=1), attention_mask=attention_mask,
                           logits_to_keep=1)[:, -1]
    return torch.cat([ids, *tokens[1:]], dim=1)


@torch.inference_mode()
def beam_search(model, ids, max_new_tokens: int, num_beams: int = 4, length_penalty: float = 1.0,
                eos_token_id=None) -> tuple[torch.Tensor, float]:
    """Keep the num_beams most likely continuations at every step; return the best one and its log-probability.

    ids (1, T): one prompt. At each step every beam is extended by every token, and the num_beams
    pairs (beam, token) with the highest total log-probability survive. A beam that produces an id of
    eos_token_id (None, one id, or several, as generate takes them) is finished; the search stops when
    num_beams beams have finished (the best finished one wins) or after max_new_tokens (the best
    finished or live one wins). Finished beams are ranked by
    log-probability / length ** length_penalty (0: no normalisation, favours short texts). Returns
    ((1, T + n) ids, the winner's summed log-probability). Uses a KV cache whose rows are reordered
    when beams are dropped or copied.

    >>> from llmlab import ModelConfig, Transformer
    >>> model = Transformer(ModelConfig.preset("tiny-llama")).eval()
    >>> best, logp = beam_search(model, torch.tensor([[1, 2, 3]]), 5, num_beams=1)   # 1 beam: greedy
    >>> torch.equal(best, generate(model, torch.tensor([[1, 2, 3]]), 5)), logp < 0
    (True, True)
    """
    ids = as_ids(model, None, ids)
    if ids.shape[0] != 1:
        raise ValueError(f"beam_search takes one prompt, ids of shape (1, T); got {tuple(ids.shape)}. "
                         f"Run it once per prompt.")
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, low=1)
    num_beams = check_int("num_beams", num_beams, low=1, hint="1 is greedy decoding; 4 or 5 is usual.")
    length_penalty = check_number("length_penalty", length_penalty, low=0)
    check_context_length(model, ids.shape[1], max_new_tokens)
    eos = set(eos_ids(eos_token_id, model.config.vocab_size))
    cache = GrowingKVCache(model.config.n_layers)
    logp = torch.log_softmax(prefill(model, ids, cache).float(), dim=-1)   # (1, V)
    beams = ids                                   # (n_beams, T + t): the live beams
    scores = torch.zeros(1, device=ids.device)    # (n_beams,): summed log-probability of each
    finished = []                                 # (normalised score, raw score, ids)
    for step in range(max_new_tokens):
        V = logp.shape[-1]
        total = (scores[:, None] + logp).reshape(-1)                       # (n_beams * V,)
        best, flat = total.topk(min(2 * num_beams, total.numel()))         # spare ones replace finished beams
        keep_rows, keep_tokens, keep_scores = [], [], []
        for score, index in zip(best.tolist(), flat.tolist()):
            row, token = divmod(index, V)
            candidate = torch.cat([beams[row], beams.new_tensor([token])])
            if token in eos:
                finished.append((score / (step + 1) ** length_penalty, score, candidate))
            else:
                keep_rows.append(row)
                keep_tokens.append(token)
                keep_scores.append(score)
            if len(keep_rows) == num_beams:
                break
        if len(finished) >= num_beams:            # enough finished texts: stop (transformers' early_stopping)
            return _best(finished)                # and return one of them: the live beams are a step behind
        rows = torch.tensor(keep_rows, device=ids.device)
        beams = torch.cat([beams[rows], torch.tensor(keep_tokens, device=ids.device)[:, None]], dim=1)
        scores = torch.tensor(keep_scores, device=ids.device)
        cache.reorder(rows)                       # the surviving beams' pasts, in their new order
        if step < max_new_tokens - 1:
            logp = torch.log_softmax(decode_step(model, beams[:, -1], cache).float(), dim=-1)  # (n_beams, V)
    n = beams.shape[1] - ids.shape[1]
    live = [(s / n ** length_penalty, s, b) for s, b in zip(scores.tolist(), beams)]
    return _best(finished + live)


def _stream(stream, token: torch.Tensor, stopped: torch.Tensor | None) -> None:
    """Hand this step's new tokens (B,) to stream, leaving out stop tokens (the rows in `stopped`)."""
    if stopped is None or not bool(stopped.any()):
        stream(int(token[0]) if token.shape[0] == 1 else token.tolist())
    elif not bool(stopped.all()):           # B > 1: the rows still writing, None for those that stopped
        stream([None if done else t for t, done in zip(token.tolist(), stopped.tolist())])


def _best(candidates: list) -> tuple[torch.Tensor, float]:
    """The (normalised score, raw score, ids) with the highest normalised score -> ((1, T + n) ids, raw score)."""
    _, raw, winner = max(candidates, key=lambda f: f[0])
    return winner[None], raw


def _check_given_cache(model, cache, B: int, T: int, max_new_tokens: int) -> None:
    """A cache passed to generate must be a KV cache of this model holding at most the T tokens of ids."""
    if not all(hasattr(cache, name) for name in ("seq_len", "update", "crop", "keys")):
        raise TypeError(f"kv_cache must be 'static', 'growing' or a KV cache (GrowingKVCache / StaticKVCache) "
                        f"that holds the start of ids; got {type(cache).__name__}.")
    n_layers = getattr(cache, "n_layers", len(cache.keys))
    if n_layers != model.config.n_layers:
        raise ValueError(f"the cache has {n_layers} layers but the model has {model.config.n_layers}: it was "
                         "made for another model. Make one with GrowingKVCache.for_model(model).")
    P = cache.seq_len
    if P > T:
        raise ValueError(f"the cache holds {P} positions but ids has only {T} tokens; ids must be the {P} cached "
                         f"tokens followed by the new ones (or keep the first n with cache.crop(n)).")
    stored = next((k for k in cache.keys if k is not None), None) if P > 0 else None
    if stored is not None and stored.shape[0] != B:
        raise ValueError(f"the cache holds a batch of {stored.shape[0]} rows but ids has {B}; "
                         + ("cache.expand(B) makes one copy of its prefix per row." if stored.shape[0] == 1
                            else "continue it with ids of the same batch size."))
    if stored is not None and stored.device != model.device:
        raise ValueError(f"the cache lives on {stored.device} but the model on {model.device}; fill it with "
                         "this model (prefill(model, prefix_ids, cache)).")
    needed = T + max_new_tokens - 1              # the last new token is returned, never fed back
    if isinstance(cache, StaticKVCache) and cache.max_len < needed:
        raise ValueError(f"this StaticKVCache holds max_len={cache.max_len} positions, but {T} tokens + "
                         f"{max_new_tokens} new ones need {needed}; make it with a larger max_len "
                         "(StaticKVCache.for_model(model)) or ask for fewer new tokens.")


def sampling_temperature(temperature, top_k, top_p, min_p, repetition_penalty, do_sample) -> float:
    """generate's sampling arguments checked together; the temperature it samples at (0 = greedy)."""
    temperature = _temperature(temperature, do_sample)
    check_sampling(temperature, top_k, top_p, min_p)
    if repetition_penalty is not None:
        check_number("repetition_penalty", repetition_penalty, low=0, low_open=True, hint="1.0 changes nothing.")
    return temperature


def seeded_generator(seed, device) -> torch.Generator | None:
    """The generator of one generate call: its own, seeded, so the same seed draws the same tokens; None
    (torch's global one) without a seed."""
    if seed is None:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(check_int("seed", seed))
    return generator


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
