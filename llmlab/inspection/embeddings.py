"""The embedding table as a map of meaning: nearest neighbours and analogy arithmetic.

Each token id owns one row of `model.tok_embed.weight` (vocab, d). Tokens used alike end up
with rows that point alike, so the rows closest (by cosine) to " king" tend to be related
words, and the famous arithmetic " king" - " man" + " woman" lands near " queen" (sometimes).

    nearest_tokens(model, tok, " king", k=5)   # [(' kings', 0.71), (' King', 0.66), ...]
    analogy(model, tok, " man", " king", " woman")
"""
from __future__ import annotations

import torch

from llmlab.checks import check_int, check_vector, token_id


def embedding_table(model) -> torch.Tensor:
    """The (vocab, d_model) input embedding matrix."""
    return model.tok_embed.weight


@torch.no_grad()
def nearest_to_vector(model, tokenizer, vector: torch.Tensor, k: int = 10, exclude=()) -> list[tuple[str, float]]:
    """The k tokens whose embedding rows have the highest cosine with `vector` (d_model,)."""
    table = embedding_table(model).float()                                  # (vocab, d)
    vector = check_vector("vector", vector, table.shape[1], table.device).float()  # (d,)
    k = check_int("k", k, 1, table.shape[0])
    sims = table @ vector / (table.norm(dim=-1) * vector.norm()).clamp_min(1e-12)  # (vocab,)
    for i in exclude:
        sims[i] = -float("inf")
    values, ids = sims.topk(k)
    return [(tokenizer.decode([int(i)]), float(v)) for v, i in zip(values, ids)]


def nearest_tokens(model, tokenizer, token, k: int = 10) -> list[tuple[str, float]]:
    """Nearest neighbours of one token's embedding (the token itself left out)."""
    i = token_id(tokenizer, token)
    return nearest_to_vector(model, tokenizer, embedding_table(model)[i], k, exclude=[i])


def analogy(model, tokenizer, a, b, c, k: int = 5) -> list[tuple[str, float]]:
    """a is to b as c is to ...? Neighbours of emb(b) - emb(a) + emb(c), leaving out a, b and c."""
    ids = [token_id(tokenizer, t) for t in (a, b, c)]
    table = embedding_table(model)
    vector = table[ids[1]] - table[ids[0]] + table[ids[2]]  # (d,)
    return nearest_to_vector(model, tokenizer, vector, k, exclude=ids)
