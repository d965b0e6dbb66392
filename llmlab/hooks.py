"""Hook points: named places in the model where you can read or replace an intermediate tensor.

A `HookPoint` is a module that returns its input unchanged. Because it is a module, plain torch
hooks work on it, and `model.named_modules()` gives it a stable name such as
`blocks.3.attn.hook_pattern`.

>>> import torch
>>> hp = HookPoint()
>>> seen = []
>>> handle = hp.register_forward_hook(lambda module, inputs, output: seen.append(output.shape))
>>> hp(torch.zeros(2, 3)).shape, seen
(torch.Size([2, 3]), [torch.Size([2, 3])])
>>> handle.remove()

A forward hook that returns a tensor replaces the value the model goes on with
(that is how steering and ablations work).

Names inside a block are built with `hook_name` rather than by hand:

>>> hook_name(3, "resid_pre"), hook_name(0, "attn.pattern"), hook_name(2, "mlp.hook_post")
('blocks.3.hook_resid_pre', 'blocks.0.attn.hook_pattern', 'blocks.2.mlp.hook_post')
"""
from __future__ import annotations

import torch
from torch import nn


# The letters of a layout: batch, query positions, key positions, query heads, key/value heads, head
# width, model width, FFN width, vocabulary. capture and patch read a hook's layout, never its name.
LAYOUT_LETTERS = ("B", "T", "S", "H", "K", "hd", "d", "ff", "V")


class HookPoint(nn.Module):
    """Identity module; attach torch forward hooks to read or replace the tensor passing through.

    layout names the tensor's dimensions, e.g. "B T d" (the residual stream) or "B H T S" (attention
    weights: batch, heads, query positions, key positions). It is the one place a hook's shape is known.
    """

    def __init__(self, layout: str = "B T d"):
        super().__init__()
        letters = layout.split()
        if "T" not in letters or any(letter not in LAYOUT_LETTERS for letter in letters):
            raise ValueError(f"layout {layout!r} must name its dimensions with {LAYOUT_LETTERS}, including T.")
        self.layout = layout

    @property
    def position_dim(self) -> int:
        """Which dimension holds the (query) token positions."""
        return self.layout.split().index("T")

    def shape(self, sizes: dict) -> tuple:
        """The tensor's shape given a size for each letter: {"B": 2, "T": 5, "d": 64, ...}."""
        return tuple(sizes[letter] for letter in self.layout.split())

    def extra_repr(self) -> str:
        return self.layout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def hook_name(layer: int, point: str) -> str:
    """The hook name of `point` in block `layer`: hook_name(3, "resid_pre") -> "blocks.3.hook_resid_pre".

    point is what follows "blocks.{layer}.", with or without the "hook_" of its last part ("attn.pattern"
    or "attn.hook_pattern"). layer is a block index 0..n_layers-1 (see llmlab.checks.resolve_layer for
    negative layers).
    """
    if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0:
        raise ValueError(f"layer must be a block index >= 0; got {layer!r}. Resolve negative layers first with "
                         "llmlab.checks.resolve_layer(model.config.n_layers, layer).")
    *module, last = point.split(".")
    if not last.startswith("hook_"):
        last = "hook_" + last
    return ".".join(["blocks", str(layer), *module, last])
