"""Patchscope: let the model put a hidden state into words.

Take the residual stream of one token in one prompt (the source), copy it into a different
prompt (the template) in place of a placeholder token, and let the model continue. The
template is written so that continuing it means "say what the placeholder is", e.g. the
identity template "cat -> cat; 1135 -> 1135; hello -> hello; ? ->": whatever the copied
vector stands for, the model tends to repeat it after "->".

    patchscope(model, tok, "The capital of France", source_layer=8)   # e.g. ' Paris' or ' France'

This is the logit lens's bigger sibling: instead of one unembedding, the model's own later
layers decode the vector, and it can answer in several tokens.
"""
from __future__ import annotations

import dataclasses

import torch

from llmlab.checks import as_ids, prompt_rows, resolve_layer, resolve_position
from llmlab.hooks import hook_name
from llmlab.inspection.capture import capture, hooks

IDENTITY_TEMPLATE = "cat -> cat; 1135 -> 1135; hello -> hello; ? ->"


@dataclasses.dataclass
class PatchscopeResult:
    text: str                  # what the model wrote after the template
    source_layer: int
    target_layer: int
    target_position: int       # where in the template the state went


def _placeholder_position(tokenizer, template_ids: torch.Tensor, placeholder: str) -> int:
    """Position of the last token of the last occurrence of `placeholder` in the template."""
    want = tokenizer.encode(placeholder, add_special_tokens=False)
    ids = template_ids[0].tolist()
    for start in range(len(ids) - len(want), -1, -1):
        if ids[start:start + len(want)] == want:
            return start + len(want) - 1
    # Tokenization may merge the placeholder with its neighbour (" ?" vs "?"): fall back to decoding.
    for pos in range(len(ids) - 1, -1, -1):
        if placeholder.strip() and placeholder.strip() in tokenizer.decode([ids[pos]]):
            return pos
    raise ValueError(f"The placeholder {placeholder!r} does not occur in the template; put it where the "
                     "hidden state should go, or pass target_position=.")


@torch.no_grad()
def patchscope(model, tokenizer, source_prompt, source_layer: int, source_position: int = -1,
               template: str = IDENTITY_TEMPLATE, target_layer: int | None = None,
               target_position: int | None = None, placeholder: str = "?", max_new_tokens: int = 8,
               attention_mask=None):
    """Copy `blocks.{source_layer}.hook_resid_post` at `source_position` of the source prompt into
    `blocks.{target_layer}.hook_resid_post` of the template at the placeholder, then generate greedily.

    A list of source prompts (or padded ids with attention_mask) gives a list of PatchscopeResult, one per
    prompt, `source_position` counted within each prompt.
    """
    n = model.config.n_layers
    source_layer = resolve_layer(n, source_layer)
    target_layer = source_layer if target_layer is None else resolve_layer(n, target_layer)
    rows, several = prompt_rows(model, tokenizer, source_prompt, attention_mask)
    results = [_patchscope(model, tokenizer, ids, source_layer, source_position, template, target_layer,
                           target_position, placeholder, max_new_tokens) for ids in rows]
    return results if several else results[0]


def _patchscope(model, tokenizer, source_ids, source_layer, source_position, template, target_layer,
                target_position, placeholder, max_new_tokens) -> PatchscopeResult:
    """patchscope of one source prompt, source_ids (1, T)."""
    from llmlab.generation import generate

    name = hook_name(source_layer, "resid_post")
    position = resolve_position(source_position, source_ids.shape[1], "source_position")
    _, cache = capture(model, None, source_ids, names=[name], positions=[position])   # one vector, one head row
    state = cache[name][0, 0]  # (d,)

    ids = as_ids(model, tokenizer, template)
    if target_position is None:
        target_position = _placeholder_position(tokenizer, ids, placeholder)
    target_position = resolve_position(target_position, ids.shape[1], "target_position")
    done = []

    def inject(h):  # (B, T, d); the prompt pass covers the placeholder, later decode steps do not
        if done or h.shape[1] <= target_position:
            return None
        done.append(True)
        h = h.clone()
        h[:, target_position] = state.to(h.device, h.dtype)
        return h

    with hooks(model, {hook_name(target_layer, "resid_post"): inject}):
        out = generate(model, ids, max_new_tokens=max_new_tokens, use_cache=True)  # (1, T + new)
    if not done:
        raise RuntimeError("The hidden state was never injected; is target_position inside the template?")
    text = tokenizer.decode(out[0, ids.shape[1]:].tolist())
    return PatchscopeResult(text, source_layer, target_layer, target_position)
