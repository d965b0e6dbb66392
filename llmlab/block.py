"""A Transformer block: attention and feed-forward, each added to the residual stream, with norms.

Where the norms sit is the main thing that changed between generations:

    pre      (GPT-2, Llama, Qwen, Phi):  x = x + attn(norm(x));          x = x + ffn(norm(x))
    post     (2017 original):            x = norm(x + attn(x));          x = norm(x + ffn(x))
    sandwich (Gemma 2/3):                x = x + norm(attn(norm(x)));    x = x + norm(ffn(norm(x)))

Pre-norm keeps an untouched residual path from the embedding to the output, which is what lets
deep stacks train without warm-up tricks; post-norm renormalises the stream itself after each add.
"""
from __future__ import annotations

import torch
from torch import nn

from llmlab.attention import Attention
from llmlab.ffn import make_ffn
from llmlab.hooks import HookPoint
from llmlab.norms import make_norm


class Block(nn.Module):
    """One decoder block of the layout config.block ("pre", "post" or "sandwich")."""

    def __init__(self, config, layer_idx: int = 0):
        super().__init__()
        self.layout = config.block
        self.attn_norm = make_norm(config)   # Hugging Face: input_layernorm / ln_1
        self.attn = Attention(config, layer_idx)
        self.mlp_norm = make_norm(config)    # Llama: post_attention_layernorm; Gemma: pre_feedforward_layernorm
        self.mlp = make_ffn(config)
        if self.layout == "sandwich":
            self.post_attn_norm = make_norm(config)  # Gemma: post_attention_layernorm
            self.post_mlp_norm = make_norm(config)   # Gemma: post_feedforward_layernorm
        self.hook_resid_pre, self.hook_attn_out, self.hook_resid_mid = HookPoint(), HookPoint(), HookPoint()
        self.hook_mlp_out, self.hook_resid_post = HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor, rope=None, mask=None, bias=None, cache=None, attn_impl="sdpa") -> torch.Tensor:
        """x (B, T, d) -> (B, T, d); the arguments after x go to the attention layer unchanged."""
        x = self.hook_resid_pre(x)
        if self.layout == "post":
            a = self.hook_attn_out(self.attn(x, rope, mask, bias, cache, attn_impl))
            x = self.hook_resid_mid(self.attn_norm(x + a))
            m = self.hook_mlp_out(self.mlp(x))
            return self.hook_resid_post(self.mlp_norm(x + m))

        a = self.attn(self.attn_norm(x), rope, mask, bias, cache, attn_impl)
        if self.layout == "sandwich":
            a = self.post_attn_norm(a)
        x = self.hook_resid_mid(x + self.hook_attn_out(a))
        m = self.mlp(self.mlp_norm(x))
        if self.layout == "sandwich":
            m = self.post_mlp_norm(m)
        return self.hook_resid_post(x + self.hook_mlp_out(m))
