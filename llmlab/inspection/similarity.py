"""How alike are two representations? Cosine similarity and linear CKA.

Cosine compares two vectors: the same word in two contexts, one position at two layers, one
prompt in two models of the same width.

>>> import torch
>>> cosine(torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0]))
tensor(0.7071)

Linear CKA (centered kernel alignment) compares two *sets* of vectors for the same n inputs,
X (n, d1) and Y (n, d2), even when d1 != d2 (two models of different widths). It asks whether
the two sets have the same geometry: 1 when one is a rotation and rescaling of the other,
near 0 when they are unrelated.

>>> X = torch.randn(50, 8)
>>> round(linear_cka(X, 3 * X).item(), 4)
1.0
"""
from __future__ import annotations

import torch

from llmlab.checks import as_batch, resolve_layer, resolve_position
from llmlab.hooks import hook_name
from llmlab.inspection.budget import RESULT_LIMIT, check_size
from llmlab.inspection.capture import capture


def cosine(a: torch.Tensor, b: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Cosine similarity along `dim` (broadcasting): a . b / (|a| |b|)."""
    a, b = a.double(), b.double()
    value = (a * b).sum(dim) / (a.norm(dim=dim) * b.norm(dim=dim)).clamp_min(1e-12)
    return value.float()


def cosine_matrix(X: torch.Tensor, Y: torch.Tensor | None = None) -> torch.Tensor:
    """All pairwise cosines: X (n, d), Y (m, d) -> (n, m). Y=None compares X with itself."""
    Y = X if Y is None else Y
    if X.shape[-1] != Y.shape[-1]:
        raise ValueError(f"cosine needs vectors of the same width; got {X.shape[-1]} and {Y.shape[-1]}. "
                         "To compare representations of different widths use linear_cka.")
    Xn = X.double() / X.double().norm(dim=-1, keepdim=True).clamp_min(1e-12)  # (n, d)
    Yn = Y.double() / Y.double().norm(dim=-1, keepdim=True).clamp_min(1e-12)  # (m, d)
    return (Xn @ Yn.T).float()  # (n, m)


def linear_cka(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """Linear CKA between X (n, d1) and Y (n, d2): rows are the same n inputs (tokens, prompts).

    CKA = |Yc^T Xc|_F^2 / (|Xc^T Xc|_F |Yc^T Yc|_F), with Xc, Yc the column-centered matrices.
    """
    if X.dim() != 2 or Y.dim() != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"linear_cka needs X (n, d1) and Y (n, d2) with the same n rows (one per input); "
                         f"got {tuple(X.shape)} and {tuple(Y.shape)}. Flatten (B, T, d) to (B*T, d) first.")
    if X.shape[0] < 2:
        raise ValueError("linear_cka needs at least 2 inputs (rows); centering one row leaves all zeros.")
    Xc = X.double() - X.double().mean(0, keepdim=True)  # (n, d1)
    Yc = Y.double() - Y.double().mean(0, keepdim=True)  # (n, d2)
    cross = (Yc.T @ Xc).pow(2).sum()                      # |Yc^T Xc|_F^2, (d2, d1) summed
    norm_x = (Xc.T @ Xc).pow(2).sum().sqrt()              # |Xc^T Xc|_F, (d1, d1) summed
    norm_y = (Yc.T @ Yc).pow(2).sum().sqrt()              # |Yc^T Yc|_F, (d2, d2) summed
    return (cross / (norm_x * norm_y).clamp_min(1e-30)).float()


def cka_matrix(reps_a: list[torch.Tensor], reps_b: list[torch.Tensor] | None = None) -> torch.Tensor:
    """CKA between every pair: e.g. each layer of model A vs each layer of model B -> (len_a, len_b).

    Same value as linear_cka on every pair. With fewer inputs than features (n <= d, the usual case
    for a prompt or a handful of sentences) it is much faster: |Yc^T Xc|_F^2 equals the inner product
    <Xc Xc^T, Yc Yc^T> of the two (n, n) Gram matrices, so each representation's Gram matrix is
    built once and every pair costs one n x n dot product instead of three d x d products.
    """
    reps_b = reps_a if reps_b is None else reps_b
    if len(reps_a) == 0 or len(reps_b) == 0:
        raise ValueError("cka_matrix needs at least one representation on each side, e.g. a list of layers.")
    for rep in [*reps_a, *reps_b]:
        if rep.dim() != 2 or rep.shape[0] != reps_a[0].shape[0]:
            raise ValueError(f"cka_matrix needs (n, d) matrices with the same n rows (one per input); got "
                             f"{tuple(rep.shape)} next to {tuple(reps_a[0].shape)}.")
    if reps_a[0].shape[0] < 2:
        raise ValueError("linear_cka needs at least 2 inputs (rows); centering one row leaves all zeros.")

    if reps_a[0].shape[0] > max(rep.shape[1] for rep in [*reps_a, *reps_b]):
        # many inputs: (n, n) Gram matrices would be larger than the (d, d) products of linear_cka
        return torch.stack([torch.stack([linear_cka(a, b) for b in reps_b]) for a in reps_a])

    def unit_gram(X):                                     # (n, d) -> (n*n,) with |K|_F = 1
        Xc = X.double() - X.double().mean(0, keepdim=True)
        K = (Xc @ Xc.T).flatten()                         # (n, n) Gram matrix, flattened
        return K / K.norm().clamp_min(1e-30)

    grams_a = torch.stack([unit_gram(X) for X in reps_a])                        # (len_a, n*n)
    grams_b = grams_a if reps_b is reps_a else torch.stack([unit_gram(Y) for Y in reps_b])
    return (grams_a @ grams_b.T).float()                                         # (len_a, len_b)


def _layers(cache, batch: int = 0, columns=None) -> list[torch.Tensor]:
    """Residual stream after the embedding and after every block, row `batch`'s real tokens (or these of its
    columns): n_layers + 1 tensors (T, d), each taken from the cache alone (no (L+1, B, T, d) copy of it all)."""
    columns = cache.real_positions(batch) if columns is None else columns
    return [stream[batch, columns] for stream in cache.resid_streams()]   # L+1 x (T, d)


def position_similarity(cache, layer: int | str, batch: int = 0, max_bytes: int | None = RESULT_LIMIT) -> torch.Tensor:
    """Cosine between every pair of positions at one block's output (-1: the last block; "embed": the
    embeddings): (T, T). Refused up front when the (T, T) table (and its float64 working copy) would
    be larger than max_bytes."""
    streams = cache.resid_streams()
    row = 0 if layer == "embed" else resolve_layer(len(streams) - 1, layer) + 1
    real = cache.real_positions(batch)
    check_size(f"position_similarity over {len(real)} positions (a {len(real)} x {len(real)} table)",
               len(real) ** 2 * 12, max_bytes, "Capture fewer positions (capture(..., positions=[...])), a shorter "
               "prompt, or raise max_bytes.")
    return cosine_matrix(streams[row][batch, real])                         # (T, T)


def layer_similarity(cache, position: int = -1, batch: int = 0) -> torch.Tensor:
    """Cosine between one position's residual vector at every pair of layers: (L+1, L+1)."""
    real = cache.real_positions(batch)
    column = real[resolve_position(position, len(real))]
    return cosine_matrix(torch.stack(_layers(cache, batch, [column]))[:, 0])  # (L+1, d) -> (L+1, L+1)


def layer_cka(cache_a, cache_b=None, batch: int = 0) -> torch.Tensor:
    """CKA between every layer of one run and every layer of another (same tokens): (La+1, Lb+1).

    The rows of each layer's representation are the T positions of the prompt.
    """
    a = _layers(cache_a, batch)
    b = a if cache_b is None else _layers(cache_b, batch)
    if a[0].shape[0] != b[0].shape[0]:
        raise ValueError(f"The two runs have {a[0].shape[0]} and {b[0].shape[0]} positions; CKA needs the same "
                         "inputs. Use the same tokenizer and prompt for both models.")
    return cka_matrix(a, b)


@torch.no_grad()
def prompt_similarity(model, tokenizer, prompts: list[str], layer: int, position: int = -1) -> torch.Tensor:
    """Cosine between the residual vectors of several prompts at one layer and position: (N, N).

    With prompts that end in the same word ("I sat by the river bank", "I paid at the bank"),
    this shows how far context has moved that word's vector apart, layer by layer. The prompts run
    as one left-padded batch; position counts within each prompt (-1: its last token).
    """
    if isinstance(prompts, str) or len(prompts) < 2:
        raise ValueError("prompt_similarity compares several prompts: pass a list of at least two.")
    name = hook_name(resolve_layer(model.config.n_layers, layer), "resid_post")
    ids, attention_mask = as_batch(model, tokenizer, list(prompts))
    _, cache = capture(model, None, ids, names=[name], attention_mask=attention_mask, logits_to_keep=1)  # not read
    vectors = []
    for row in range(ids.shape[0]):
        real = cache.real_positions(row)
        vectors.append(cache[name][row, real[resolve_position(position, len(real))]])  # (d,)
    return cosine_matrix(torch.stack(vectors))  # (N, N)
