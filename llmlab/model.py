"""The decoder-only language model: embed, a stack of blocks, final norm, LM head.

    ids (B, T) -> tok_embed (+ positions) -> blocks[0] ... blocks[n-1] -> final_norm -> lm_head -> logits (B, T, vocab)

>>> import torch
>>> from llmlab.config import ModelConfig
>>> model = Transformer(ModelConfig.preset("tiny-llama"))
>>> model(torch.tensor([[1, 2, 3]])).shape
torch.Size([1, 3, 128])

The residual stream is the (B, T, d_model) tensor that flows through the blocks; every block reads
from it and adds its result back. Hook points (see llmlab/hooks.py) expose it at every step.
"""
from __future__ import annotations

import torch
from torch import nn

from llmlab.block import Block
from llmlab.embedding import TokenEmbedding
from llmlab.hooks import HookPoint
from llmlab.norms import make_norm
from llmlab.positions import LearnedPositionalEmbedding, RotaryEmbedding, alibi_slopes, sinusoidal_encoding


class Transformer(nn.Module):
    """A decoder-only Transformer LM built from a ModelConfig.

    forward(ids, cache=None, attn_impl=None, attention_mask=None, last_only=False) -> logits
      ids             LongTensor (B, T) of token ids
      cache           a GrowingKVCache / StaticKVCache: ids are the next T positions after what it holds
      attn_impl       "sdpa" (fast, default: self.attn_impl) or "eager" (explicit weights, hook_pattern fires)
      attention_mask  (B, T_past + T), 1 for real tokens and 0 for padding (left padding for batches)
      last_only       compute logits for the last position only (what generation needs)

    With tie_embeddings the LM head *is* the embedding matrix; the state dict then lists that matrix
    once, as tok_embed.weight (a load without lm_head.weight is filled from it).
    """

    def __init__(self, config, attn_impl: str = "sdpa"):
        super().__init__()
        c = self.config = config
        self.attn_impl = attn_impl
        self.tok_embed = TokenEmbedding(c.vocab_size, c.d_model, c.embed_scale)
        if c.positions == "learned":
            self.pos_embed = LearnedPositionalEmbedding(c.max_seq_len, c.d_model)
        if c.positions == "rope":
            rotary_dim = c.rotary_dim or c.head_dim
            self.rope = RotaryEmbedding(rotary_dim, c.rope_theta, c.rope_scaling)
            # Gemma 3: sliding layers use their own, smaller base and no scaling.
            if c.rope_local_theta is not None and "sliding" in c.layer_types:
                self.rope_local = RotaryEmbedding(rotary_dim, c.rope_local_theta, None)
        if c.positions == "alibi":
            self.register_buffer("alibi_slopes", alibi_slopes(c.n_heads), persistent=False)
        self.blocks = nn.ModuleList([Block(c, i) for i in range(c.n_layers)])
        self.final_norm = make_norm(c)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_embeddings:
            self.lm_head.weight = self.tok_embed.weight
            self._register_state_dict_hook(_drop_tied_head)
            self.register_load_state_dict_pre_hook(_fill_tied_head)
        self.hook_embed, self.hook_final_norm, self.hook_logits = HookPoint(), HookPoint(), HookPoint()
        self.apply(_init_weights)

    @property
    def device(self) -> torch.device:
        return self.tok_embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.tok_embed.weight.dtype

    # ------------------------------------------------------------ forward

    def forward(self, ids: torch.Tensor, cache=None, attn_impl: str | None = None,
                attention_mask: torch.Tensor | None = None, last_only: bool = False) -> torch.Tensor:
        c = self.config
        start = cache.seq_len if cache is not None else 0
        check_ids(ids, self, start)
        B, T = ids.shape
        attn_impl = attn_impl or self.attn_impl
        position_ids = None
        if attention_mask is not None:
            attention_mask = self._check_attention_mask(attention_mask, B, start + T)
            # With left padding, the first real token of each row is position 0.
            position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, start:]  # (B, T)

        x = self.tok_embed(ids)  # (B, T, d)
        if c.positions in ("learned", "sinusoidal"):
            pos = position_ids if position_ids is not None else torch.arange(start, start + T, device=ids.device)
            if c.positions == "learned":
                x = x + self.pos_embed(pos)
            else:
                x = x + sinusoidal_encoding(start + T if position_ids is None else int(pos.max()) + 1,
                                            c.d_model, device=ids.device)[pos].to(x.dtype)
        x = self.hook_embed(x)

        rope = {"full": None, "sliding": None}
        if c.positions == "rope":
            rope["full"] = rope["sliding"] = self.rope(start, T, x.device, x.dtype, position_ids)
            if hasattr(self, "rope_local"):
                rope["sliding"] = self.rope_local(start, T, x.device, x.dtype, position_ids)
        masks = self.attention_masks(start, T, attention_mask, x.device)
        bias = None
        if c.positions == "alibi":
            q_pos = torch.arange(start, start + T, device=x.device)
            k_pos = torch.arange(start + T, device=x.device)
            bias = self.alibi_slopes[:, None, None] * (k_pos[None, :] - q_pos[:, None])[None]  # (H, T, T_k)

        for i, block in enumerate(self.blocks):
            kind = c.layer_types[i]
            x = block(x, rope[kind], masks[kind], bias, cache, attn_impl)  # (B, T, d)

        if last_only:
            x = x[:, -1:]  # (B, 1, d): during generation only the last position's logits are used
        return self.hook_logits(self._logits(self.hook_final_norm(self.final_norm(x))))

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        logits = self.lm_head(h)  # (B, T, vocab)
        cap = self.config.final_logit_softcap
        if cap is not None:
            logits = cap * torch.tanh(logits / cap)
        return logits

    def unembed(self, h: torch.Tensor) -> torch.Tensor:
        """Residual stream (..., d) -> logits (..., vocab): final norm, LM head, soft-cap (the logit lens)."""
        return self._logits(self.final_norm(h))

    def attention_masks(self, start: int, T: int, attention_mask: torch.Tensor | None, device) -> dict:
        """Bool masks (True = may attend) for queries start..start+T-1 over keys 0..start+T-1.

        Returns {"full": ..., "sliding": ...}: causal for full layers, causal and at most
        sliding_window back for sliding layers, each (T, T_k), or (B, 1, T, T_k) with padding. None means
        "no mask needed": one new token with no padding sees every cached key.
        """
        window = self.config.sliding_window
        has_sliding = "sliding" in self.config.layer_types
        T_k = start + T
        if T == 1 and attention_mask is None:
            if not has_sliding or T_k <= window:
                return {"full": None, "sliding": None}
            k_pos = torch.arange(T_k, device=device)[None, :]               # (1, T_k)
            return {"full": None, "sliding": k_pos > start - window}         # the last `window` keys
        k_pos = torch.arange(T_k, device=device)[None, :]          # (1, T_k)
        q_pos = torch.arange(start, T_k, device=device)[:, None]  # (T, 1)
        full = k_pos <= q_pos                                      # (T, T_k)
        sliding = full & (k_pos > q_pos - window) if has_sliding else None
        if attention_mask is not None:
            pad = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T_k)
            # A padding query may see itself, so no row is entirely masked (that would give NaN in sdpa).
            itself = k_pos == q_pos                        # (T, T_k)
            full = (full & pad) | itself                   # (B, 1, T, T_k)
            sliding = (sliding & pad) | itself if has_sliding else None
        return {"full": full, "sliding": sliding}

    def _check_attention_mask(self, attention_mask, B, T_k):
        if not isinstance(attention_mask, torch.Tensor) or tuple(attention_mask.shape) != (B, T_k):
            shape = tuple(attention_mask.shape) if isinstance(attention_mask, torch.Tensor) else type(attention_mask)
            raise ValueError(f"attention_mask must be a tensor of shape (batch, cached + new tokens) = {(B, T_k)}, "
                             f"with 1 for real tokens and 0 for padding; got {shape}.")
        return attention_mask.to(self.device)


def _init_weights(module):
    """GPT-2's initialisation: small normal weights, zero biases (used when training from scratch)."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


def _drop_tied_head(module, state_dict, prefix, local_metadata):
    state_dict.pop(prefix + "lm_head.weight", None)


def _fill_tied_head(module, state_dict, prefix, *args):
    if prefix + "lm_head.weight" not in state_dict and prefix + "tok_embed.weight" in state_dict:
        state_dict[prefix + "lm_head.weight"] = state_dict[prefix + "tok_embed.weight"]


def check_ids(ids, model, start: int = 0) -> None:
    """Raise a clear error for token ids the model cannot take (instead of a deep torch traceback)."""
    c = model.config
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"ids must be a torch.LongTensor of shape (batch, seq_len); got {type(ids).__name__}. "
                        "For a list of ids use torch.tensor([ids]).")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"ids must hold integer token ids (torch.long); got dtype {ids.dtype}. Token ids index "
                        "the embedding table -- pass the tokenizer's output, or ids.long() if they are whole numbers.")
    if ids.dim() != 2:
        raise ValueError(f"ids must be 2-D (batch, seq_len); got shape {tuple(ids.shape)}. "
                         "For a single sequence use ids.unsqueeze(0).")
    if ids.shape[1] == 0 or ids.shape[0] == 0:
        raise ValueError(f"ids is empty (shape {tuple(ids.shape)}); give at least one token per row"
                         + (f", e.g. the BOS id {c.bos_token_id}." if c.bos_token_id is not None else "."))
    if ids.device != model.device:
        raise ValueError(f"ids are on {ids.device} but the model is on {model.device}. Move one to the other: "
                         f"ids = ids.to(model.device) (or model.to(ids.device)).")
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= c.vocab_size:
        bad = lo if lo < 0 else hi
        raise ValueError(f"token id {bad} is outside the vocabulary: this model knows ids 0..{c.vocab_size - 1}. "
                         "Was the text encoded with a different model's tokenizer?")
    if start + ids.shape[1] > c.max_seq_len:
        raise ValueError(f"sequence too long: {start} cached + {ids.shape[1]} new = {start + ids.shape[1]} positions, "
                         f"but the model's context is max_seq_len={c.max_seq_len}. Shorten the input "
                         "(e.g. keep the last max_seq_len tokens).")
