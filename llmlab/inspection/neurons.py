"""One FFN neuron at a time: on which tokens does it fire hardest?

Neuron j of block i is column j of the FFN hidden layer, `blocks.{i}.mlp.hook_post[..., j]`
(the value that multiplies row j of the down projection). Running a few texts and sorting
every token by that value often shows what the neuron responds to.

    top_activating_tokens(model, tok, texts, layer=3, neuron=117, k=10)
    # [(4.1, ' Paris', 'The Eiffel Tower is in| Paris|'), ...]
"""
from __future__ import annotations

import torch

from llmlab.checks import as_ids, check_int, resolve_layer
from llmlab.hooks import hook_name
from llmlab.inspection.capture import capture


@torch.no_grad()
def neuron_activations(model, tokenizer, text: str, layer: int, neuron: int) -> tuple[list[str], torch.Tensor]:
    """(token strings, activations (T,)) of one neuron over one text."""
    d_ff = model.config.d_ff
    check_int("neuron", neuron)
    if not 0 <= neuron < d_ff:
        raise IndexError(f"neuron {neuron} does not exist; the FFN of this model has {d_ff} neurons (0..{d_ff - 1}).")
    name = hook_name(resolve_layer(model.config.n_layers, layer), "mlp.post")
    ids = as_ids(model, tokenizer, text)
    _, cache = capture(model, None, ids, names=[name])
    tokens = [tokenizer.decode([int(i)]) for i in ids[0]]
    return tokens, cache[name][0, :, neuron].float().cpu()  # (T,)


def top_activating_tokens(model, tokenizer, texts: list[str], layer: int, neuron: int, k: int = 10,
                          context: int = 4) -> list[tuple[float, str, str]]:
    """The k (activation, token, context) triples with the highest activation over all texts.

    context: how many tokens before the token to show; the token itself is marked with |...|.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings; for one text use [text].")
    check_int("k", k, low=1)
    check_int("context", context, low=0)
    found = []
    for text in texts:
        tokens, acts = neuron_activations(model, tokenizer, text, layer, neuron)
        for t, value in enumerate(acts.tolist()):
            snippet = "".join(tokens[max(0, t - context):t]) + "|" + tokens[t] + "|"
            found.append((value, tokens[t], snippet))
    found.sort(key=lambda item: -item[0])
    return found[:k]
