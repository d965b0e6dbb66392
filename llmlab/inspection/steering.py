"""Steering: push the residual stream along a direction and watch what the model writes.

A steering vector is the difference of two means: the average residual stream at one layer on
prompts that have a property ("I love ...") minus the average on prompts that lack it ("I hate
..."). Adding `scale * vector` to that layer's output on every position while generating
nudges the model toward the property; a negative scale nudges it away; scale 0 changes nothing.

    v = steering_vector(model, tok, ["I love it", "What a joy"], ["I hate it", "What a pain"], layer=12)
    generate_steered(model, tok, "Today I feel", v, layer=12, scale=4.0)
"""
from __future__ import annotations

import contextlib

import torch

from llmlab.checks import as_batch, check_number, is_batch, check_vector, real_positions, resolve_layer, resolve_position
from llmlab.hooks import hook_name
from llmlab.inspection.capture import capture, hooks


@torch.no_grad()
def mean_resid(model, tokenizer, prompts: list[str], layer: int, position: int | str = -1) -> torch.Tensor:
    """Mean of `blocks.{layer}.hook_resid_post` over prompts: at one position of each prompt (-1: its last
    token), or position="mean" (all its tokens). The prompts run as one left-padded batch.

    Returns (d_model,).
    """
    if isinstance(prompts, str) or not prompts:
        raise TypeError("prompts must be a non-empty list of strings; for one prompt use [prompt].")
    name = hook_name(resolve_layer(model.config.n_layers, layer), "resid_post")
    ids, attention_mask = as_batch(model, tokenizer, list(prompts))
    _, cache = capture(model, None, ids, names=[name], attention_mask=attention_mask, logits_to_keep=1)  # not read
    vectors = []
    for row in range(ids.shape[0]):
        h = cache[name][row, real_positions(attention_mask, row, ids.shape[1])]  # (T_r, d)
        vectors.append(h.mean(0) if position == "mean" else h[resolve_position(position, h.shape[0])])
    return torch.stack(vectors).mean(0)  # (d,)


def steering_vector(model, tokenizer, positive: list[str], negative: list[str], layer: int,
                    position: int | str = -1) -> torch.Tensor:
    """Difference of means at `layer`: mean(positive) - mean(negative), shape (d_model,)."""
    if not positive or not negative:
        raise ValueError("steering_vector needs at least one positive and one negative prompt.")
    return mean_resid(model, tokenizer, positive, layer, position) - mean_resid(model, tokenizer, negative, layer, position)


@contextlib.contextmanager
def steer(model, vector: torch.Tensor, layer: int, scale: float = 1.0):
    """Inside the `with`, every forward pass adds scale * vector to the output of block `layer`
    at every position (including the new ones during generation with a KV cache)."""
    name = hook_name(resolve_layer(model.config.n_layers, layer), "resid_post")
    vector = check_vector("vector", vector, model.config.d_model, model.device)  # (d,), on the model's device
    scale = check_number("scale", scale)

    def add(h):  # (B, T, d)
        return h + scale * vector.to(h.dtype)

    with hooks(model, {name: add}):
        yield model


def generate_steered(model, tokenizer, prompt, vector: torch.Tensor, layer: int, scale: float,
                     max_new_tokens: int = 20, **generate_kwargs):
    """Greedy (by default) continuation of `prompt` with the steering vector added; returns the new text
    (a list of texts -> a list of new texts, generated as one left-padded batch)."""
    from llmlab.generation import generate

    ids, attention_mask = as_batch(model, tokenizer, prompt)
    with torch.no_grad(), steer(model, vector, layer, scale):
        out = generate(model, ids, max_new_tokens=max_new_tokens, attention_mask=attention_mask,
                       **generate_kwargs)  # (B, T + new)
    texts = [tokenizer.decode(row[ids.shape[1]:].tolist()) for row in out]
    return texts if is_batch(prompt, ids) else texts[0]
