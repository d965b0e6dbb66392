"""Change one intermediate and watch the output: ablation and activation patching.

Ablation removes a part: zero what one attention or FFN sublayer adds to the residual stream, or
zero one head's output before the output projection. If the answer collapses, that part mattered.

    logits = ablate(model, ids, layer=5, sublayer="attn")           # whole attention sublayer
    logits = ablate(model, ids, layer=5, sublayer="attn", head=3)   # one head

Activation patching swaps a part: run a "clean" prompt and a "corrupted" one that differs in one
detail, then rerun the corrupted prompt with one activation copied in from the clean run. The
positions and layers where the copy restores the clean answer are where that detail lives.

    effect = patching_sweep(model, clean_ids, corrupt_ids, metric)  # (n_layers, T)
"""
from __future__ import annotations

import torch

from llmlab.inspection.capture import as_ids, capture, hooks

SUBLAYERS = {"attn": "hook_attn_out", "mlp": "hook_mlp_out"}


def _run(model, ids, fns: dict) -> torch.Tensor:
    with torch.no_grad(), hooks(model, fns):
        return model(ids)  # (B, T, vocab)


def ablate(model, prompt, layer: int, sublayer: str = "attn", head: int | None = None, positions=None,
           tokenizer=None) -> torch.Tensor:
    """Logits with one sublayer's contribution (or one head's) set to zero.

    sublayer: "attn" or "mlp"; head: zero only this attention head (its slice of hook_z, which
    is the head's weighted values before W_o mixes the heads); positions: only at these positions.
    """
    ids = as_ids(model, prompt, tokenizer)
    n_layers = model.config.n_layers
    if not -n_layers <= layer < n_layers:
        raise IndexError(f"layer {layer} does not exist; the model has {n_layers} layers.")
    layer %= n_layers
    if sublayer not in SUBLAYERS:
        raise ValueError(f"sublayer must be 'attn' or 'mlp', got {sublayer!r}.")
    where = slice(None) if positions is None else torch.as_tensor(positions, device=ids.device)
    if head is None:
        name = f"blocks.{layer}.{SUBLAYERS[sublayer]}"

        def zero(x):  # (B, T, d)
            x = x.clone()
            x[:, where] = 0.0
            return x
    else:
        if sublayer != "attn" or not 0 <= head < model.config.n_heads:
            raise ValueError(f"head={head} needs sublayer='attn' and 0 <= head < {model.config.n_heads}.")
        name = f"blocks.{layer}.attn.hook_z"

        def zero(z):  # (B, T, n_heads, head_dim)
            z = z.clone()
            z[:, where, head] = 0.0
            return z
    return _run(model, ids, {name: zero})


def patch(model, prompt, name: str, value: torch.Tensor, positions=None, tokenizer=None) -> torch.Tensor:
    """Logits with the activation at hook `name` replaced by `value` at `positions` (None: everywhere).

    `value` has the hook's shape with the position dimension either full length or len(positions).
    """
    from llmlab.inspection.capture import position_dim

    ids = as_ids(model, prompt, tokenizer)
    dim = position_dim(name)

    def replace(x):
        x = x.clone()
        v = value.to(x.device, x.dtype)
        if positions is None:
            return v.expand_as(x).clone()
        index = torch.as_tensor(positions, device=x.device) % x.shape[dim]
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


def patching_sweep(model, clean, corrupt, metric, hook: str = "hook_resid_pre", tokenizer=None) -> torch.Tensor:
    """Patch the clean run's `blocks.{i}.{hook}` into the corrupted run at every (layer, position).

    Returns (n_layers, T): the metric after each single patch, normalised so 0 = the corrupted
    run's value and 1 = the clean run's. Both prompts must have the same number of tokens.
    """
    clean_ids, corrupt_ids = as_ids(model, clean, tokenizer), as_ids(model, corrupt, tokenizer)
    if clean_ids.shape != corrupt_ids.shape:
        raise ValueError(f"clean and corrupted prompts must have the same number of tokens so positions line "
                         f"up; got {clean_ids.shape[1]} and {corrupt_ids.shape[1]}.")
    clean_logits, cache = capture(model, clean_ids, names=[f"*.{hook}"])
    with torch.no_grad():
        corrupt_value = metric(model(corrupt_ids))
    clean_value = metric(clean_logits)
    scale = clean_value - corrupt_value
    if abs(scale) < 1e-9:
        raise ValueError("The metric is the same on the clean and corrupted prompts; nothing to restore.")
    n_layers, T = model.config.n_layers, clean_ids.shape[1]
    effect = torch.zeros(n_layers, T)
    for layer in range(n_layers):
        name = f"blocks.{layer}.{hook}"
        for pos in range(T):
            logits = patch(model, corrupt_ids, name, cache[name], positions=[pos])
            effect[layer, pos] = (metric(logits) - corrupt_value) / scale
    return effect
