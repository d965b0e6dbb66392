"""Prompt-lookup decoding: exactly the tokens of greedy `generate`, in fewer passes over the weights.

Producing one token reads every weight of the model once, and on a CPU (or a small GPU) that
memory traffic, not the arithmetic, sets the speed. A pass over 1 + k tokens reads the same weights
once too, so it costs little more than a pass over one. If we can *guess* the next k tokens
cheaply, the model can check all the guesses in one pass, and every correct guess is a token for
free.

The guess: find the last few tokens earlier in the text and propose whatever followed them there.
Text repeats itself (names, numbers, code, lists, phrases from the prompt), so this is often right.
The model then verifies: guesses are kept up to the first one greedy decoding would not have
picked, and at that position the model's own token is taken. The output is therefore greedy
decoding's output; only the number of passes changes. (A pass over k tokens rounds floats a little
differently from k one-token passes, so two candidates whose logits tie to ~1e-5 could swap.)

    out = generate_lookup(model, ids, max_new_tokens=100)      # same as generate(model, ids, 100)
"""
from __future__ import annotations

import torch

from llmlab.checks import as_ids, check_int
from llmlab.generation import check_context_length, eos_ids, prefill
from llmlab.kvcache import StaticKVCache


def propose_draft(tokens: list[int], max_ngram: int = 3, draft_len: int = 8) -> list[int]:
    """Guess the next tokens: what followed the latest earlier copy of the text's last n tokens.

    Tries n = max_ngram first, then shorter n-grams; returns [] when nothing matches.

    >>> propose_draft([5, 6, 7, 9, 5, 6], max_ngram=2, draft_len=3)   # [5, 6] was followed by 7, 9, 5
    [7, 9, 5]
    >>> propose_draft([1, 2, 3], max_ngram=2, draft_len=3)
    []
    """
    for n in range(min(max_ngram, len(tokens) - 1), 0, -1):
        tail = tokens[-n:]
        for start in range(len(tokens) - n - 1, -1, -1):  # latest earlier occurrence first
            if tokens[start:start + n] == tail:
                return tokens[start + n:start + n + draft_len]
    return []


@torch.inference_mode()
def generate_lookup(model, ids, max_new_tokens: int, draft_len: int = 8, max_ngram: int = 3,
                    eos_token_id=None, stats: dict | None = None) -> torch.Tensor:
    """Greedy decoding of one sequence with prompt-lookup guesses; returns ids (1, T + new).

    Same tokens as `generate(model, ids, max_new_tokens, eos_token_id=...)` with temperature 0, and the
    same forms of eos_token_id (None, one id, or several). If `stats` is a dict, it receives the number
    of model passes and of accepted guesses.

    >>> from llmlab import ModelConfig, Transformer, generate
    >>> model = Transformer(ModelConfig.preset("tiny-llama")).eval()
    >>> ids = torch.tensor([[5, 6, 7, 5, 6]])
    >>> stats = {}
    >>> torch.equal(generate_lookup(model, ids, 6, stats=stats), generate(model, ids, 6)), stats["new_tokens"]
    (True, 6)
    """
    ids = as_ids(model, None, ids)
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, low=0)
    draft_len = check_int("draft_len", draft_len, low=1)
    max_ngram = check_int("max_ngram", max_ngram, low=1)
    B, T = ids.shape
    if B != 1:
        raise ValueError(f"generate_lookup decodes one sequence at a time; got a batch of {B}. "
                         "Loop over the rows, or use llmlab.generate for batches.")
    check_context_length(model, T, max_new_tokens)
    eos = set(eos_ids(eos_token_id, model.config.vocab_size))
    if max_new_tokens <= 0:
        return ids
    cache = StaticKVCache(model.config.n_layers, T + max_new_tokens)
    tokens = ids[0].tolist()
    tokens.append(int(prefill(model, ids, cache).argmax(-1)))  # the first new token; not in the cache yet
    passes, accepted_total = 1, 0

    def finished() -> bool:
        return len(tokens) - T >= max_new_tokens or tokens[-1] in eos

    while not finished():
        room = max_new_tokens - (len(tokens) - T)           # guesses past the limit would be wasted
        draft = propose_draft(tokens, max_ngram, min(draft_len, room))
        step = torch.tensor([[tokens[-1]] + draft], device=ids.device)  # (1, 1 + k)
        greedy = model(step, cache=cache)[0].argmax(-1).tolist()       # greedy[i]: the choice after step[i]
        passes += 1
        accepted = 0
        while accepted < len(draft) and draft[accepted] == greedy[accepted]:
            accepted += 1
        accepted_total += accepted
        # The cache now holds keys/values for all 1 + k inputs; keep only the last token and the
        # accepted guesses (the rejected positions are overwritten by the next pass).
        cache.crop(len(tokens) + accepted)
        for token in draft[:accepted] + [greedy[accepted]]:
            tokens.append(token)
            if finished():
                break
    if stats is not None:
        stats.update(passes=passes, accepted=accepted_total, new_tokens=len(tokens) - T)
    return torch.tensor([tokens], device=ids.device)
