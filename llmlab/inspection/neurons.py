"""One FFN neuron at a time: on which tokens does it fire hardest?

Neuron j of block i is column j of the FFN hidden layer, `blocks.{i}.mlp.hook_post[..., j]`
(the value that multiplies row j of the down projection). Running a few texts and sorting
every token by that value often shows what the neuron responds to.

    top_activating_tokens(model, tok, texts, layer=3, neuron=117, k=10)
    # [(4.1, ' Paris', 'The Eiffel Tower is in| Paris|'), ...]
"""
from __future__ import annotations

import torch

from llmlab.checks import as_batch, check_int, is_batch, real_positions, resolve_layer
from llmlab.hooks import hook_name
from llmlab.inspection.capture import capture, token_strings


@torch.no_grad()
def neuron_activations(model, tokenizer, text, layer: int, neuron: int, attention_mask=None):
    """(token strings, activations (T,)) of one neuron over one text; for a list of texts, one such
    pair per text (its real tokens only), from one batched run."""
    d_ff = model.config.d_ff
    check_int("neuron", neuron)
    if not 0 <= neuron < d_ff:
        raise IndexError(f"neuron {neuron} does not exist; the FFN of this model has {d_ff} neurons (0..{d_ff - 1}).")
    name = hook_name(resolve_layer(model.config.n_layers, layer), "mlp.post")
    ids, attention_mask = as_batch(model, tokenizer, text, attention_mask)
    _, cache = capture(model, None, ids, names=[name], attention_mask=attention_mask, logits_to_keep=1)  # not read
    pairs = []
    for row in range(ids.shape[0]):
        real = real_positions(attention_mask, row, ids.shape[1])
        pairs.append((token_strings(tokenizer, ids[row, real]), cache[name][row, real, neuron].float().cpu()))  # (T_r,)
    return pairs if is_batch(text, ids) else pairs[0]


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
    for tokens, acts in neuron_activations(model, tokenizer, list(texts), layer, neuron):
        for t, value in enumerate(acts.tolist()):
            snippet = "".join(tokens[max(0, t - context):t]) + "|" + tokens[t] + "|"
            found.append((value, tokens[t], snippet))
    found.sort(key=lambda item: -item[0])
    return found[:k]
