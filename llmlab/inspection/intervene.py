"""Change one intermediate and watch the output: ablation and activation patching.

Ablation removes a part: zero what one attention or FFN sublayer adds to the residual stream, or
zero one head's output before the output projection. If the answer collapses, that part mattered.

    logits = ablate(model, tok, prompt, layer=5, sublayer="attn")           # whole attention sublayer
    logits = ablate(model, tok, prompt, layer=5, sublayer="attn", head=3)   # one head

Activation patching swaps a part: run a "clean" prompt and a "corrupted" one that differs in one
detail, then rerun the corrupted prompt with one activation copied in from the clean run. The
positions and layers where the copy restores the clean answer are where that detail lives.

    logits = patch(model, tok, corrupt, hook_name(5, "resid_pre"), clean_cache[name], positions=[3])

A sweep over every (layer, position) is llmlab.inspection.causal_trace(..., corrupt=...). Both functions
take a batch (a list of texts, or ids with attention_mask) and return (B, T, vocab) logits.
"""
from __future__ import annotations

import torch

from llmlab.checks import as_batch, check_int, resolve_layer, resolve_position
from llmlab.hooks import hook_name
from llmlab.inspection.capture import hook_point, hook_shape, hooks

SUBLAYERS = {"attn": "hook_attn_out", "mlp": "hook_mlp_out"}


def _run(model, ids, attention_mask, fns: dict) -> torch.Tensor:
    eager = "eager" if any(name.endswith("hook_pattern") for name in fns) else None  # weights exist only there
    with torch.no_grad(), hooks(model, fns, eager):
        return model(ids, attention_mask=attention_mask)  # (B, T, vocab)


def ablate(model, tokenizer, prompt, layer: int, sublayer: str = "attn", head: int | None = None,
           positions=None, attention_mask=None) -> torch.Tensor:
    """Logits with one sublayer's contribution (or one head's) set to zero.

    sublayer: "attn" or "mlp"; head: zero only this attention head (its slice of hook_z, which
    is the head's weighted values before W_o mixes the heads); positions: only at these positions
    (with a padded batch, count from the end: -1 is every row's last real token).
    """
    ids, attention_mask = as_batch(model, tokenizer, prompt, attention_mask)
    layer = resolve_layer(model.config.n_layers, layer)
    if sublayer not in SUBLAYERS:
        raise ValueError(f"sublayer must be 'attn' or 'mlp', got {sublayer!r}.")
    where = slice(None) if positions is None else \
        torch.tensor([resolve_position(p, ids.shape[1]) for p in _as_list(positions)], device=ids.device)
    if head is None:
        name = hook_name(layer, SUBLAYERS[sublayer])

        def zero(x):  # (B, T, d)
            x = x.clone()
            x[:, where] = 0.0
            return x
    else:
        if sublayer != "attn":
            raise ValueError(f"head={head} needs sublayer='attn' (an FFN has no heads).")
        head = check_int("head", head, 0, model.config.n_heads - 1)
        name = hook_name(layer, "attn.z")

        def zero(z):  # (B, T, n_heads, head_dim)
            z = z.clone()
            z[:, where, head] = 0.0
            return z
    return _run(model, ids, attention_mask, {name: zero})


def _as_list(positions) -> list:
    return [positions] if isinstance(positions, int) else list(positions)


def patch(model, tokenizer, prompt, name: str, value: torch.Tensor, positions=None,
          attention_mask=None) -> torch.Tensor:
    """Logits with the activation at hook `name` replaced by `value` at `positions` (None: everywhere).

    `value` has the hook's shape with the position dimension either full length or len(positions); a batch
    dimension of 1 is used for every row.
    """
    ids, attention_mask = as_batch(model, tokenizer, prompt, attention_mask)
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

