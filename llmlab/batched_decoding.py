"""Decode loops for several runs at once: on a CPU a step costs nearly as much for a few rows as for many.

    outs = generate_several(model, ids, 32, [dict(temperature=0), dict(temperature=0.8, seed=0)],
                            attention_mask=mask)             # = two generate calls, run side by side
    found = beam_search_batch(model, ids, 32, num_beams=4, attention_mask=mask)   # = beam_search per prompt

Each gives what the one-run loops of llmlab.generation give, run by run, up to the rounding of a larger batch.
"""
from __future__ import annotations

import torch

from llmlab.checks import as_ids, check_attention_mask, check_int, check_number
from llmlab.generation import (_best, check_context_length, decode_step, eos_ids, prefill, sampling_temperature,
                               seeded_generator)
from llmlab.kvcache import GrowingKVCache, StaticKVCache
from llmlab.sampling import apply_repetition_penalty, sample_next_token


@torch.inference_mode()
def generate_several(model, ids, max_new_tokens: int, settings: list, attention_mask: torch.Tensor | None = None,
                     eos_token_id=None, logprobs: bool = False) -> list:
    """generate(model, ids, max_new_tokens, **s) for every s in settings, run side by side in one batch.

    settings: a list of dicts of generate's sampling arguments (temperature, top_k, top_p, min_p, seed,
    repetition_penalty, do_sample). The batch holds the prompts once per setting, so each step runs the
    model once for all of them (on a CPU several small batches cost nearly as much each as one large one).
    Each setting samples its own rows with its own generator, exactly as its own call would, and its ids
    stop where its own call would stop; the results are those calls' up to the rounding of a larger batch.
    Returns one (B, T + new) tensor per setting; with logprobs=True one (ids, logp) pair per setting, logp
    (B, new) the model's log-probability of each new token as it was chosen: from the raw logits, before the
    penalty, temperature and filters (how likely the model itself finds the text).

    >>> from llmlab import ModelConfig, Transformer, generate
    >>> model = Transformer(ModelConfig.preset("tiny-llama")).eval()
    >>> ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    >>> greedy, sampled = generate_several(model, ids, 5, [dict(temperature=0), dict(temperature=1.0, seed=0)])
    >>> torch.equal(sampled, generate(model, ids, 5, temperature=1.0, seed=0)), greedy.shape
    (True, torch.Size([2, 8]))
    """
    ids = as_ids(model, None, ids)
    B, T = ids.shape
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, low=1)
    if not settings or not all(isinstance(s, dict) for s in settings):
        raise TypeError("settings must be a non-empty list of dicts of generate's sampling arguments, "
                        "e.g. [dict(temperature=0), dict(temperature=0.8, seed=0)].")
    known = {"temperature", "top_k", "top_p", "min_p", "seed", "repetition_penalty", "do_sample"}
    groups = []
    for s in settings:
        if set(s) - known:
            raise TypeError(f"generate_several takes only sampling settings ({', '.join(sorted(known))}); "
                            f"got {', '.join(sorted(set(s) - known))}.")
        temperature = sampling_temperature(s.get("temperature"), s.get("top_k"), s.get("top_p"), s.get("min_p"),
                                           s.get("repetition_penalty"), s.get("do_sample"))
        groups.append(dict(temperature=temperature, top_k=s.get("top_k"), top_p=s.get("top_p"),
                           min_p=s.get("min_p"), penalty=s.get("repetition_penalty"),
                           generator=seeded_generator(s.get("seed"), ids.device), steps=max_new_tokens,
                           finished=torch.zeros(B, dtype=torch.bool, device=ids.device)))
    G = len(groups)
    check_context_length(model, T, max_new_tokens)
    if attention_mask is not None:
        attention_mask = check_attention_mask(attention_mask, B, T, ids.device, left_padded=True).long()
        attention_mask = attention_mask.repeat(G, 1)                    # (G * B, T)
    eos = eos_ids(eos_token_id, model.config.vocab_size)
    eos = torch.tensor(eos, device=ids.device) if eos else None
    kv = StaticKVCache(model.config.n_layers, T + max_new_tokens)
    logits = prefill(model, ids.repeat(G, 1), kv, attention_mask)   # (G * B, vocab): setting g in rows g*B..
    # what the repetition penalty counts as seen: padding stands in as the prompt's last (real) token
    seen = ids if attention_mask is None else torch.where(attention_mask[:B].bool(), ids, ids[:, -1:])
    tokens = [[seen] for _ in groups]
    scores = [[] for _ in groups]                                       # (B, 1) per step and setting
    for step in range(max_new_tokens):
        nexts = []
        for g, (group, rows) in enumerate(zip(groups, logits.split(B))):
            if group["steps"] <= step:                                  # its own call has stopped: EOS filler
                nexts.append(torch.full((B,), int(eos[0]), device=ids.device))
                continue
            if group["penalty"] is not None:
                rows = apply_repetition_penalty(rows, torch.cat(tokens[g], dim=1), group["penalty"])
            token = sample_next_token(rows, group["temperature"], group["top_k"], group["top_p"],
                                      group["generator"], group["min_p"])   # (B,)
            if eos is not None:
                token = torch.where(group["finished"], eos[0], token)
                group["finished"] |= torch.isin(token, eos)
                if bool(group["finished"].all()):
                    group["steps"] = step + 1                           # where its own call stops
            tokens[g].append(token[:, None])
            nexts.append(token)
            if logprobs:
                raw = logits[g * B:(g + 1) * B].float()
                scores[g].append(torch.log_softmax(raw, dim=-1).gather(1, token[:, None]))
        if step == max_new_tokens - 1 or all(group["steps"] <= step + 1 for group in groups):
            break
        if attention_mask is not None:
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones(G * B, 1)], dim=1)
        logits = decode_step(model, torch.cat(nexts), kv, attention_mask)
    outs = [torch.cat([ids, *tokens[g][1:]], dim=1) for g in range(G)]
    return [(out, torch.cat(score, dim=1)) for out, score in zip(outs, scores)] if logprobs else outs


@torch.inference_mode()
def beam_search_batch(model, ids, max_new_tokens: int, num_beams: int = 4, length_penalty: float = 1.0,
                      eos_token_id=None, attention_mask: torch.Tensor | None = None) -> list:
    """beam_search for several prompts at once: ids (B, T), left-padded with attention_mask (encode_batch).

    Each prompt keeps its own num_beams beams, all B * num_beams in one batch, so each step runs the model
    once for every prompt. Returns one (ids (1, T_b + n_b), summed log-probability) per prompt, with its
    padding removed: what beam_search(model, that prompt, ...) returns, up to the rounding of a larger batch.

    >>> from llmlab import ModelConfig, Transformer, beam_search
    >>> model = Transformer(ModelConfig.preset("tiny-llama")).eval()
    >>> found = beam_search_batch(model, torch.tensor([[0, 1, 2], [3, 4, 5]]), 5,
    ...                           attention_mask=torch.tensor([[0, 1, 1], [1, 1, 1]]))
    >>> alone = beam_search(model, torch.tensor([[1, 2]]), 5)
    >>> torch.equal(found[0][0], alone[0]), abs(found[0][1] - alone[1]) < 1e-4
    (True, True)
    """
    ids = as_ids(model, None, ids)
    B, T = ids.shape
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, low=1)
    num_beams = check_int("num_beams", num_beams, low=1, hint="1 is greedy decoding; 4 or 5 is usual.")
    length_penalty = check_number("length_penalty", length_penalty, low=0)
    check_context_length(model, T, max_new_tokens)
    eos = set(eos_ids(eos_token_id, model.config.vocab_size))
    K = num_beams
    mask = None if attention_mask is None else \
        check_attention_mask(attention_mask, B, T, ids.device, left_padded=True).long()
    n_pad = [0] * B if mask is None else (mask == 0).sum(1).tolist()
    cache = GrowingKVCache(model.config.n_layers)
    logp = torch.log_softmax(prefill(model, ids, cache, mask).float(), dim=-1)   # (B, V)
    # every prompt starts as K copies of itself; only the first counts at the first step (the others score -inf)
    rows = torch.arange(B, device=ids.device).repeat_interleave(K)                # (B * K,)
    cache.reorder(rows)
    beams, logp = ids[rows], logp[rows]
    mask = None if mask is None else mask[rows]
    scores = torch.full((B, K), float("-inf"), device=ids.device)
    scores[:, 0] = 0.0
    finished = [[] for _ in range(B)]                 # per prompt: (normalised score, raw score, ids)
    done = [False] * B
    V = logp.shape[-1]
    for step in range(max_new_tokens):
        total = (scores.reshape(-1, 1) + logp).view(B, K * V)                   # (B, K * V)
        best, flat = total.topk(min(2 * K, K * V), dim=-1)                      # spare ones replace finished beams
        keep_rows, keep_tokens, keep_scores = [], [], []
        for b in range(B):
            kept = []
            if not done[b]:
                for score, index in zip(best[b].tolist(), flat[b].tolist()):
                    if score == float("-inf"):
                        break
                    row, token = divmod(index, V)
                    if token in eos:
                        candidate = torch.cat([beams[b * K + row], beams.new_tensor([token])])
                        finished[b].append((score / (step + 1) ** length_penalty, score, candidate))
                    else:
                        kept.append((b * K + row, token, score))
                    if len(kept) == K:
                        break
                if len(finished[b]) >= K:                 # enough finished texts: this prompt is done
                    done[b] = True
            while len(kept) < K:                          # a done prompt (or one short of beams) fills its rows
                kept.append((b * K, int(beams[b * K, -1]), float("-inf")))
            for row, token, score in kept:
                keep_rows.append(row)
                keep_tokens.append(token)
                keep_scores.append(score)
        if all(done):
            break
        rows = torch.tensor(keep_rows, device=ids.device)
        beams = torch.cat([beams[rows], torch.tensor(keep_tokens, device=ids.device)[:, None]], dim=1)
        scores = torch.tensor(keep_scores, device=ids.device).view(B, K)
        cache.reorder(rows)
        if step < max_new_tokens - 1:
            if mask is not None:
                mask = torch.cat([mask[rows], mask.new_ones(B * K, 1)], dim=1)
            logp = torch.log_softmax(decode_step(model, beams[:, -1], cache, mask).float(), dim=-1)  # (B * K, V)
    results = []
    for b in range(B):
        candidates = finished[b]
        if not done[b]:
            n = beams.shape[1] - T
            candidates = candidates + [(s / n ** length_penalty, s, beams[b * K + j])
                                       for j, s in enumerate(scores[b].tolist()) if s > float("-inf")]
        winner, raw = _best(candidates)
        results.append((winner[:, n_pad[b]:], raw))
    return results
