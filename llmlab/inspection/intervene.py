"""Change one intermediate and watch the output: ablation and activation patching.

Ablation removes a part: zero what one attention or FFN sublayer adds to the residual stream, or
zero one head's output before the output projection. If the answer collapses, that part mattered.

    logits = ablate(model, tok, prompt, layer=5, sublayer="attn")           # whole attention sublayer
    logits = ablate(model, tok, prompt, layer=5, sublayer="attn", head=3)   # one head

Activation patching swaps a part: run a "clean" prompt and a "corrupted" one that differs in one
detail, then rerun the corrupted prompt with one activation copied in from the clean run. The
positions and layers where the copy restores the clean answer are where that detail lives.

    effect = patching_sweep(model, tok, clean, corrupt, metric)     # (n_layers, T)
"""
from __future__ import annotations

import torch

from llmlab.checks import as_ids, check_int, resolve_layer, resolve_position, tokenizer_first
from llmlab.hooks import hook_name
from llmlab.inspection.capture import capture, hook_shape, hooks, position_dim

SUBLAYERS = {"attn": "hook_attn_out", "mlp": "hook_mlp_out"}


def _run(model, ids, fns: dict) -> torch.Tensor:
    with torch.no_grad(), hooks(model, fns):
        return model(ids)  # (B, T, vocab)


@tokenizer_first("prompt", "layer", "sublayer", "head", "positions", "tokenizer")
def ablate(model, tokenizer, prompt, layer: int, sublayer: str = "attn", head: int | None = None,
           positions=None) -> torch.Tensor:
    """Logits with one sublayer's contribution (or one head's) set to zero.

    sublayer: "attn" or "mlp"; head: zero only this attention head (its slice of hook_z, which
    is the head's weighted values before W_o mixes the heads); positions: only at these positions.
    """
    ids = as_ids(model, tokenizer, prompt)
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
    return _run(model, ids, {name: zero})


def _as_list(positions) -> list:
    return [positions] if isinstance(positions, int) else list(positions)


@tokenizer_first("prompt", "name", "value", "positions", "tokenizer")
def patch(model, tokenizer, prompt, name: str, value: torch.Tensor, positions=None) -> torch.Tensor:
    """Logits with the activation at hook `name` replaced by `value` at `positions` (None: everywhere).

    `value` has the hook's shape with the position dimension either full length or len(positions).
    """
    ids = as_ids(model, tokenizer, prompt)
    dim = position_dim(name)
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"value must be a tensor with the shape of hook {name!r}; got {type(value).__name__}.")
    index = None if positions is None else \
        torch.tensor([resolve_position(p, ids.shape[1]) for p in _as_list(positions)], device=ids.device)
    B, T = ids.shape
    allowed = {hook_shape(model.config, name, T, B, n) for n in (T, 1 if index is None else len(index))}
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
        x.index_copy_(dim, index, v)
        return x

    return _run(model, ids, {name: replace})


def logit_difference(token_a: int, token_b: int, position: int = -1):
    """A metric for patching: logit(token_a) - logit(token_b) at one position (e.g. ' Paris' vs ' Rome')."""
    def metric(logits: torch.Tensor) -> float:
        return float(logits[0, position, token_a] - logits[0, position, token_b])
    return metric


@tokenizer_first("clean", "corrupt", "metric", "hook", "tokenizer")
def patching_sweep(model, tokenizer, clean, corrupt, metric, hook: str = "hook_resid_pre") -> torch.Tensor:
    """Patch the clean run's `blocks.{i}.{hook}` into the corrupted run at every (layer, position).

    Returns (n_layers, T): the metric after each single patch, normalised so 0 = the corrupted
    run's value and 1 = the clean run's. Both prompts must have the same number of tokens.
    """
    clean_ids, corrupt_ids = as_ids(model, tokenizer, clean), as_ids(model, tokenizer, corrupt)
    if clean_ids.shape != corrupt_ids.shape:
        raise ValueError(f"clean and corrupted prompts must have the same number of tokens so positions line "
                         f"up; got {clean_ids.shape[1]} and {corrupt_ids.shape[1]}.")
    clean_logits, cache = capture(model, None, clean_ids, names=[f"*.{hook}"])
    with torch.no_grad():
        corrupt_value = metric(model(corrupt_ids))
    clean_value = metric(clean_logits)
    scale = clean_value - corrupt_value
    if abs(scale) < 1e-9:
        raise ValueError("The metric is the same on the clean and corrupted prompts; nothing to restore.")
    n_layers, T = model.config.n_layers, clean_ids.shape[1]
    effect = torch.zeros(n_layers, T)
    for layer in range(n_layers):
        name = hook_name(layer, hook)
        for pos in range(T):
            logits = patch(model, None, corrupt_ids, name, cache[name], positions=[pos])
            effect[layer, pos] = (metric(logits) - corrupt_value) / scale
    return effect
