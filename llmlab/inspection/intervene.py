"""Change one intermediate and watch the output: ablation and activation patching.

Ablation removes a part: zero what one attention or FFN sublayer adds to the residual stream, or
zero one head's output before the output projection. If the answer collapses, that part mattered.

    logits = ablate(model, tok, prompt, layer=5, sublayer="attn")           # whole attention sublayer
    logits = ablate(model, tok, prompt, layer=5, head=3)                    # one head
    heads, scores = top_heads(induction_scores(model), k=3)                 # [(layer, head), ...], (3,)
    loss = ablate(model, tok, prompt, heads=heads, metric="loss")           # (B, T - 1) next-token losses

Activation patching swaps a part: run a "clean" prompt and a "corrupted" one that differs in one
detail, then rerun the corrupted prompt with one activation copied in from the clean run. The
positions and layers where the copy restores the clean answer are where that detail lives.

    logits = patch(model, tok, corrupt, hook_name(5, "resid_pre"), clean_cache[name], positions=[3])

A sweep over every (layer, position) is llmlab.inspection.causal_trace(..., corrupt=...). Both functions
take a batch (a list of texts, or ids with attention_mask) and return (B, T, vocab) logits (ablate: or
the loss, or a metric).
"""
from __future__ import annotations

import torch

from llmlab.checks import as_batch, check_int, resolve_layer, resolve_position
from llmlab.hooks import hook_name
from llmlab.inspection.budget import RESULT_LIMIT, check_size, chunks, logits_row_bytes
from llmlab.inspection.capture import hook_point, hook_shape, hooks

SUBLAYERS = {"attn": "hook_attn_out", "mlp": "hook_mlp_out"}


def _run(model, ids, attention_mask, fns: dict, logits_to_keep=0) -> torch.Tensor:
    eager = "eager" if any(name.endswith("hook_pattern") for name in fns) else None  # weights exist only there
    with torch.no_grad(), hooks(model, fns, eager):
        return model(ids, attention_mask=attention_mask, logits_to_keep=logits_to_keep)  # (B, T or 1, vocab)


def ablate(model, tokenizer, prompt, layer: int | None = None, sublayer: str = "attn", head: int | None = None,
           positions=None, attention_mask=None, *, heads=None, metric=None, max_bytes: int | None = RESULT_LIMIT):
    """Rerun the prompt with parts of the model set to zero; return the logits (or a metric of them).

    What to remove, in one of two forms:
      layer, sublayer      what that block's "attn" or "mlp" sublayer adds to the residual stream;
      layer, head          one attention head of that block (sublayer "attn");
      heads=[(layer, head), ...]   any set of attention heads, across blocks; heads=[] removes
                           nothing, which gives the intact run measured the same way (a baseline).
    A head is zeroed in hook_z, its weighted values before W_o mixes the heads: its term of the
    attention output is gone (W_o's bias, if any, stays).

    positions: only at these positions (with a padded batch, count from the end: -1 is every row's
               last real token); None: everywhere.
    metric   : what to return:
      None            the logits, (B, T, vocab);
      "loss"          the next-token loss at each position, (B, T - 1) float32: entry [b, t] is
                      -log p(ids[b, t + 1]) given ids[b, :t + 1]; NaN where either token is padding
                      (average with .nanmean());
      a function      of the last position's logits (B, vocab), as in causal_trace (e.g. logit_diff(a, b),
                      or lambda logits: logits.log_softmax(-1)); its value is returned, and the LM head
                      runs at the last position only.

        ablate(model, tok, prompt, heads=[(5, 3), (7, 0)], metric=logit_diff(paris, rome))   # (B,)

    max_bytes: with metric=None, refuse up front logits larger than this (None: no limit). The loss reads the
               LM head a chunk of positions at a time (llmlab.inspection.budget), so it fits any prompt.
    """
    ids, attention_mask = as_batch(model, tokenizer, prompt, attention_mask)
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    if not (metric is None or metric == "loss" or callable(metric)):
        raise ValueError(f"metric must be None (the logits), 'loss' (the next-token loss at each position) or a "
                         f"function of the last position's logits (B, vocab); got {metric!r}.")
    if sublayer not in SUBLAYERS:
        raise ValueError(f"sublayer must be 'attn' or 'mlp', got {sublayer!r}.")
    if heads is not None:
        if layer is not None or head is not None:
            raise ValueError(f"Give either heads=[(layer, head), ...] or layer= (with head=), not both; got "
                             f"heads={heads!r}, layer={layer!r}, head={head!r}. One head is heads=[(layer, head)].")
        if sublayer != "attn":
            raise ValueError(f"heads= are attention heads; sublayer={sublayer!r} does not go with them.")
    elif layer is None:
        raise ValueError("Say what to ablate: layer=<block> (with sublayer='attn'/'mlp', or head=<head>), or "
                         "heads=[(layer, head), ...].")
    elif head is not None:
        if sublayer != "attn":
            raise ValueError(f"head={head} needs sublayer='attn' (an FFN has no heads).")
        heads = [(layer, head)]
    T = ids.shape[1]
    where = slice(None) if positions is None else \
        torch.tensor([resolve_position(p, T) for p in _as_list(positions)], device=ids.device)
    if heads is None:
        def zero(x):  # (B, T, d)
            x = x.clone()
            x[:, where] = 0.0
            return x
        fns = {hook_name(resolve_layer(n_layers, layer), SUBLAYERS[sublayer]): zero}
    else:
        by_layer = _by_layer(heads, n_layers, n_heads)  # {block: [heads]}
        fns = {hook_name(l, "attn.z"): _zero_heads(hs, where, T, n_heads) for l, hs in by_layer.items()}
    if callable(metric):
        return metric(_run(model, ids, attention_mask, fns, logits_to_keep=1)[:, -1])  # head at the last position
    if metric == "loss":
        return _loss(model, ids, attention_mask, fns)
    _check_logits("ablate", model, ids, max_bytes, "Pass metric='loss' (read a chunk of positions at a time) or "
                  "metric=<a function of the last position's logits> (the LM head runs there alone), use a shorter "
                  "prompt, or raise max_bytes.")
    return _run(model, ids, attention_mask, fns)  # (B, T, vocab)


def _check_logits(who: str, model, ids, max_bytes, way_out: str) -> None:
    """Refuse, before running, (B, T, vocab) logits larger than max_bytes."""
    B, T = ids.shape
    check_size(f"{who}'s logits ({B} x {T} positions x {model.config.vocab_size} ids)",
               B * T * model.config.vocab_size * model.dtype.itemsize, max_bytes, way_out)


def _loss(model, ids, attention_mask, fns) -> torch.Tensor:
    """ablate's metric="loss": (B, T - 1). When the logits of every position fit the working budget, from one
    run of the head over them all; else the last block's output is kept and read through the head a chunk
    of positions at a time (the same final norm and head the model runs), so memory stays at the budget."""
    B, T = ids.shape
    parts = chunks(T - 1, B * logits_row_bytes(model, 3))  # logits, float32 copy, log-softmax per position
    if len(parts) == 1:
        return _next_token_loss(_run(model, ids, attention_mask, fns), ids, attention_mask)
    kept = {}
    last = hook_name(model.config.n_layers - 1, "resid_post")
    _run(model, ids, attention_mask, {**fns, last: lambda h: kept.__setitem__("h", h)}, logits_to_keep=1)
    with torch.no_grad():
        loss = torch.cat([torch.nn.functional.cross_entropy(model.unembed(kept["h"][:, part]).float().transpose(1, 2),
                                                            ids[:, part.start + 1:part.stop + 1], reduction="none")
                          for part in parts], dim=1)                                    # (B, T - 1)
    return _mask_padding(loss, attention_mask)


def _by_layer(heads, n_layers: int, n_heads: int) -> dict:
    """[(layer, head), ...] -> {block: [heads]}, every pair checked (negative layers count from the end)."""
    if isinstance(heads, torch.Tensor):
        heads = heads.tolist()  # (n, 2) -> [[layer, head], ...]
    if isinstance(heads, tuple) and len(heads) == 2 and all(isinstance(x, int) for x in heads):
        raise TypeError(f"heads must be a list of (layer, head) pairs; got the single pair {heads!r}. "
                        f"Write heads=[{heads!r}].")
    by_layer = {}
    for pair in heads:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise TypeError(f"heads must be a list of (layer, head) pairs, e.g. [(5, 3), (7, 0)]; found {pair!r}.")
        layer = resolve_layer(n_layers, pair[0])
        head = check_int("head", pair[1], 0, n_heads - 1, hint=f"(in the pair {tuple(pair)!r})")
        by_layer.setdefault(layer, [])
        if head not in by_layer[layer]:
            by_layer[layer].append(head)
    return by_layer


def _zero_heads(heads: list[int], where, T: int, n_heads: int):
    """A hook for hook_z that zeroes these heads at `where` (a slice or positions)."""
    rows = torch.arange(T) if isinstance(where, slice) else where.cpu()
    off = torch.zeros(T, n_heads, dtype=torch.bool)  # (T, n_heads): True where a head's output goes
    off[rows[:, None], torch.tensor(heads)] = True

    def zero(z):  # (B, T, n_heads, head_dim)
        z = z.clone()
        z[:, off.to(z.device)] = 0.0
        return z
    return zero


def _next_token_loss(logits: torch.Tensor, ids: torch.Tensor, attention_mask) -> torch.Tensor:
    """(B, T, vocab) logits -> (B, T - 1) cross-entropy of each next token; NaN where input or target is padding."""
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].float().transpose(1, 2), ids[:, 1:], reduction="none")
    return _mask_padding(loss, attention_mask)


def _mask_padding(loss: torch.Tensor, attention_mask) -> torch.Tensor:
    """(B, T - 1) losses with NaN where the input or the target token is padding."""
    if attention_mask is not None:
        real = attention_mask[:, :-1].bool() & attention_mask[:, 1:].bool()  # (B, T - 1)
        loss = loss.masked_fill(~real, float("nan"))
    return loss  # (B, T - 1)


def top_heads(scores, k: int = 1, largest: bool = True) -> tuple[list[tuple[int, int]], torch.Tensor]:
    """The k best entries of a (layers, heads) score table: ([(layer, head), ...], their values (k,)).

    Best first (largest=False: smallest first); equal scores keep table order, as argmax does. The
    pairs go straight into ablate(..., heads=...). Any 2-D table works, e.g. (layers, layers) of CKA.

    >>> top_heads(torch.tensor([[0.1, 0.9, 0.3], [0.5, 0.2, 0.7]]), k=2)
    ([(0, 1), (1, 2)], tensor([0.9000, 0.7000]))
    >>> top_heads(torch.tensor([[0.1, 0.9, 0.3], [0.5, 0.2, 0.7]]), largest=False)[0]
    [(0, 0)]
    """
    scores = torch.as_tensor(scores)
    if scores.dim() != 2:
        raise ValueError(f"scores must be a 2-D table (layers, heads); got shape {tuple(scores.shape)}. "
                         "Reduce the other dimensions first, e.g. scores.mean(0).")
    k = check_int("k", k, 1, scores.numel(), hint=f"(the table has {scores.numel()} entries)")
    if scores.is_floating_point() and scores.isnan().any():
        raise ValueError(f"scores holds NaN at {scores.isnan().nonzero().tolist()[:4]} (layer, head); NaN has no "
                         "rank, so replace it (e.g. scores.nan_to_num(-float('inf'))) before picking the top.")
    order = torch.sort(scores.flatten(), descending=largest, stable=True).indices[:k]  # (k,) flat indices
    pairs = [divmod(int(i), scores.shape[1]) for i in order]                         # row-major: (layer, head)
    return pairs, scores.flatten()[order]


def _as_list(positions) -> list:
    return [positions] if isinstance(positions, int) else list(positions)


def patch(model, tokenizer, prompt, name: str, value: torch.Tensor, positions=None,
          attention_mask=None, max_bytes: int | None = RESULT_LIMIT) -> torch.Tensor:
    """Logits with the activation at hook `name` replaced by `value` at `positions` (None: everywhere).

    `value` has the hook's shape with the position dimension either full length or len(positions); a batch
    dimension of 1 is used for every row. Logits (B, T, vocab) larger than max_bytes are refused up front
    (None: no limit); a sweep of patches over a long prompt is causal_trace, which reads the last position.
    """
    ids, attention_mask = as_batch(model, tokenizer, prompt, attention_mask)
    _check_logits("patch", model, ids, max_bytes, "Use a shorter prompt or raise max_bytes; to measure what patches "
                  "do to the answer, causal_trace reads the last position only.")
    dim = hook_point(model, name).position_dim
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"value must be a tensor with the shape of hook {name!r}; got {type(value).__name__}.")
    index = None if positions is None else \
        torch.tensor([resolve_position(p, ids.shape[1]) for p in _as_list(positions)], device=ids.device)
    B, T = ids.shape
    allowed = {hook_shape(model, name, T, b, n) for b in (B, 1) for n in (T, 1 if index is None else len(index))}
    if tuple(value.shape) not in allowed:
        raise ValueError(f"value for hook {name!r} must have shape {' or '.join(map(str, sorted(allowed)))} "
                         f"(the hook's shape, over all positions or the patched ones); got {tuple(value.shape)}.")

    def replace(x):
        x = x.clone()
        v = value.to(x.device, x.dtype)
        if positions is None:
            return v.expand_as(x).clone()
        if v.shape[dim] == x.shape[dim]:
            v = v.index_select(dim, index)
        x.index_copy_(dim, index, v.expand(x.shape[0], *v.shape[1:]))
        return x

    return _run(model, ids, attention_mask, {name: replace})

