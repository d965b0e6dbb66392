"""Two rewrites of a model's layers that make each decoded token cheaper (llmlab.quantize uses both).

- Stacking: q, k and v are three matrices that read the same input, so they can be one matrix
  with their rows stacked; the output is split again (Attention.project_qkv already does this
  for checkpoints stored that way, GPT-2 and Phi-3). The same for the gate and up matrices of a
  gated FFN. The numbers are the same; a token runs 4 products per layer instead of 7.
- ExactTopHead: an LM head stored in integers, whose largest logits are recomputed in float.

>>> from llmlab.config import ModelConfig
>>> from llmlab.model import Transformer
>>> model = Transformer(ModelConfig.preset("tiny-llama"))
>>> [fused for _, fused, _ in fusable_groups(model)][:2]
['blocks.0.attn.qkv_proj', 'blocks.0.mlp.gate_up_proj']
"""
from __future__ import annotations

import dataclasses

import torch
import torch.nn as nn

from llmlab.attention import Attention
from llmlab.ffn import GatedFeedForward


def fusable_groups(model: nn.Module) -> list[tuple[nn.Module, str, list[str]]]:
    """(module, fused name, part names) for every attention with separate q/k/v and every gated FFN with
    separate gate/up: one matrix product instead of three (two) per token, the same arithmetic."""
    groups = []
    for name, module in model.named_modules():
        prefix = name + "." if name else ""
        if isinstance(module, Attention) and not module.fused:
            groups.append((module, prefix + "qkv_proj", [prefix + p for p in ("q_proj", "k_proj", "v_proj")]))
        if isinstance(module, GatedFeedForward) and not module.fused:
            groups.append((module, prefix + "gate_up_proj", [prefix + p for p in ("gate_proj", "up_proj")]))
    return groups


def fuse_group(module: nn.Module, fused_name: str, part_names: list[str], parts: list[nn.Linear]) -> nn.Linear:
    """Stack the parts' rows into one nn.Linear, drop the parts from `module` and switch it to its
    fused path (Attention.project_qkv and GatedFeedForward split the output again)."""
    first = parts[0]
    fused = nn.Linear(first.in_features, sum(p.out_features for p in parts), bias=first.bias is not None,
                      device=first.weight.device, dtype=first.weight.dtype)
    with torch.no_grad():
        fused.weight.copy_(torch.cat([p.weight for p in parts]))
        if first.bias is not None:
            fused.bias.copy_(torch.cat([p.bias for p in parts]))
    for name in part_names:
        delattr(module, name.rsplit(".", 1)[-1])  # the parts are gone: the stacked matrix replaces them
    module.fused = True
    return fused


def describe_fusion(model: nn.Module) -> None:
    """Set model.config's fused_qkv / fused_gate_up to what the layers now hold, so the config still
    describes the model (a config with them set builds the same layout)."""
    attention = [m.fused for m in model.modules() if isinstance(m, Attention)]
    gated = [m.fused for m in model.modules() if isinstance(m, GatedFeedForward)]
    model.config = dataclasses.replace(model.config, fused_qkv=bool(attention) and all(attention),
                                       fused_gate_up=bool(gated) and all(gated))


class ExactTopHead(nn.Module):
    """An integer LM head whose `k` largest logits at each position are recomputed from the float rows.

    Next-token choices (greedy, top-k, top-p) live at the top of the distribution, and there the
    int8 head's rounding can swap two close candidates. Recomputing the k candidates it ranks highest
    from the float weights costs k rows (k * d numbers) per position instead of the whole float
    matrix; logits outside them keep the integer head's error. A tied head reuses the embedding table
    the model keeps in float for its lookups, so this costs no memory.
    """

    def __init__(self, quantized: nn.Module, weight: torch.Tensor, bias: torch.Tensor | None, k: int):
        super().__init__()
        self.quantized, self.k = quantized, k
        self.in_features, self.out_features = quantized.in_features, quantized.out_features
        self.register_buffer("reference", weight.detach(), persistent=False)    # (vocab, d), float
        self.register_buffer("reference_bias", None if bias is None else bias.detach(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.quantized(x)                                                   # (..., vocab)
        top = y.topk(min(self.k, self.out_features), dim=-1).indices            # (..., k)
        rows = self.reference[top].to(x.dtype)                                  # (..., k, d)
        exact = (rows @ x.unsqueeze(-1)).squeeze(-1)                            # (..., k)
        if self.reference_bias is not None:
            exact = exact + self.reference_bias[top].to(exact.dtype)
        return y.scatter(-1, top, exact.to(y.dtype))

    def extra_repr(self) -> str:
        return f"exact top {self.k} of {self.out_features}"
