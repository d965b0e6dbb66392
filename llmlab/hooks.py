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
"""
from __future__ import annotations

import torch
from torch import nn


class HookPoint(nn.Module):
    """Identity module; attach torch forward hooks to read or replace the tensor passing through."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x
