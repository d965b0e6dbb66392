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

from llmlab.attention import causal_mask, padding_mask, sliding_window_mask
from llmlab.block import Block
from llmlab.checks import check_attention_mask, check_ids, check_int, resolve_position
from llmlab.embedding import TokenEmbedding
from llmlab.hooks import HookPoint
from llmlab.norms import make_norm
from llmlab.positions import LearnedPositionalEmbedding, RotaryEmbedding, alibi_bias, sinusoidal_encoding


class Transformer(nn.Module):
    """A decoder-only Transformer LM built from a ModelConfig.

    forward(ids, cache=None, attn_impl=None, attention_mask=None, logits_to_keep=0) -> logits
      ids             LongTensor (B, T) of token ids, from any device (moved to the model's)
      cache           a GrowingKVCache / StaticKVCache: ids are the next T positions after what it holds
      attn_impl       "sdpa" (fast, default: self.attn_impl) or "eager" (explicit weights, hook_pattern fires)
      attention_mask  (B, T_past + T), 1 for real tokens and 0 for padding (left padding for batches)
      logits_to_keep  which positions go through the final norm and the LM head (Hugging Face's name):
                      0 = all, N = the last N (1 is what generation needs), or a list / 1-D tensor of
                      positions (negative from the end) -> logits (B, P, vocab) in that order

    Token ids are checked against the vocabulary on a sequence's first pass (no cache, or an empty one);
    decode steps feed back the model's own tokens and skip that check (it costs a GPU round trip).

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
        self.blocks = nn.ModuleList([Block(c, i) for i in range(c.n_layers)])
        self.final_norm = make_norm(c)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_embeddings:
            self.lm_head.weight = self.tok_embed.weight
            self._register_state_dict_hook(_drop_tied_head)
            # public from torch 2.5; before, the private form (hook(module, state_dict, prefix, ...) as well)
            if hasattr(self, "register_load_state_dict_pre_hook"):
                self.register_load_state_dict_pre_hook(_fill_tied_head)
            else:
                self._register_load_state_dict_pre_hook(_fill_tied_head, with_module=True)
        self.hook_embed, self.hook_final_norm, self.hook_logits = HookPoint(), HookPoint(), HookPoint("B T V")
        self.apply(_init_weights)

    @property
    def device(self) -> torch.device:
        return self.tok_embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.tok_embed.weight.dtype

    # ------------------------------------------------------------ forward

    def forward(self, ids: torch.Tensor, cache=None, attn_impl: str | None = None,
                attention_mask: torch.Tensor | None = None, logits_to_keep=0) -> torch.Tensor:
        """ids (B, T) -> embed (+ positions) -> blocks, each given its RoPE tables, mask and ALiBi bias
        -> final norm -> LM head -> logits (B, T, vocab); (B, N, vocab) or (B, P, vocab) with logits_to_keep.

        The LM head is the widest product of the model (Gemma: 262,144 outputs per position), so
        running it only where the logits are read saves most of a long prompt's head work:

        >>> from llmlab.config import ModelConfig
        >>> model = Transformer(ModelConfig.preset("tiny-llama"))
        >>> ids = torch.tensor([[1, 2, 3, 4]])
        >>> model(ids, logits_to_keep=1).shape, model(ids, logits_to_keep=[0, -1]).shape
        (torch.Size([1, 1, 128]), torch.Size([1, 2, 128]))
        """
        start = cache.seq_len if cache is not None else 0          # positions already in the cache
        ids = check_ids(ids, self, start, check_values=start == 0)  # (B, T), on the model's device; ids
        # are range-checked on a sequence's first pass; later passes feed back tokens the model chose
        B, T = ids.shape
        keep = _logits_positions(logits_to_keep, T)                 # None (all), a slice or positions
        if attention_mask is not None:
            attention_mask = check_attention_mask(attention_mask, B, start + T, self.device)
        positions = self.position_ids(start, T, attention_mask)     # (T,), or (B, T) with padding

        x = self.hook_embed(self.embed(ids, positions, start + T))  # (B, T, d)
        rope = self.rope_tables(start, T, positions, x)             # {"full"/"sliding": (cos, sin) or None}
        masks = self.attention_masks(start, T, attention_mask, x.device)
        bias = alibi_bias(self.config.n_heads, T, x.device, start).to(x.dtype) \
            if self.config.positions == "alibi" else None           # (H, T, T_k)
        for block, kind in zip(self.blocks, self.config.layer_types):
            x = block(x, rope[kind], masks[kind], bias, cache, attn_impl or self.attn_impl)  # (B, T, d)

        if keep is not None:
            x = x[:, keep]  # (B, P, d): the head runs on the kept positions only (generation: the last one)
        return self.hook_logits(self._logits(self.hook_final_norm(self.final_norm(x))))

    def position_ids(self, start: int, T: int, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Position of each new token: start..start+T-1 (T,); with padding, counted from each row's first
        real token, (B, T) -- a left-padded row then sees the positions it would have alone."""
        if attention_mask is None:
            return torch.arange(start, start + T, device=self.device)
        return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, start:]  # (B, T)

    def embed(self, ids: torch.Tensor, positions: torch.Tensor, n_positions: int) -> torch.Tensor:
        """Token embeddings, plus the position vectors for learned / sinusoidal positions: (B, T, d).

        positions (T,) or (B, T) are all below n_positions (cached + new tokens)."""
        c = self.config
        x = self.tok_embed(ids)  # (B, T, d)
        if c.positions == "learned":
            x = x + self.pos_embed(positions)
        elif c.positions == "sinusoidal":
            x = x + sinusoidal_encoding(n_positions, c.d_model, device=ids.device)[positions].to(x.dtype)
        return x

    def rope_tables(self, start: int, T: int, positions: torch.Tensor, x: torch.Tensor) -> dict:
        """RoPE's cos/sin for the new positions, per layer kind (Gemma's sliding layers have their own base)."""
        if self.config.positions != "rope":
            return {"full": None, "sliding": None}
        position_ids = positions if positions.dim() == 2 else None  # (T,) is the plain slice start..start+T-1
        full = self.rope(start, T, x.device, x.dtype, position_ids)
        local = self.rope_local(start, T, x.device, x.dtype, position_ids) if hasattr(self, "rope_local") else full
        return {"full": full, "sliding": local}

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
        if T == 1 and attention_mask is None and (not has_sliding or start + 1 <= window):
            return {"full": None, "sliding": None}
        full = None if T == 1 and attention_mask is None else causal_mask(T, device, start)  # (T, T_k)
        sliding = sliding_window_mask(T, window, device, start) if has_sliding else None   # (T, T_k)
        if attention_mask is not None:
            # A padding query may still see itself, so no row is all masked (sdpa would give NaN).
            itself = sliding_window_mask(T, 1, device, start)                              # (T, T_k)
            full = (full & padding_mask(attention_mask)) | itself                           # (B, 1, T, T_k)
            sliding = (sliding & padding_mask(attention_mask)) | itself if has_sliding else None
        return {"full": full, "sliding": sliding}


def _logits_positions(logits_to_keep, T: int):
    """logits_to_keep -> None (every position), a slice (the last N) or a list of positions in 0..T-1."""
    hint = ("logits_to_keep is 0 (every position), N (the last N positions; 1 = the last, what generation "
            "needs) or a list / 1-D tensor of positions.")
    if isinstance(logits_to_keep, torch.Tensor):
        if logits_to_keep.dim() == 0:
            logits_to_keep = int(logits_to_keep) if not logits_to_keep.is_floating_point() else logits_to_keep
        elif logits_to_keep.dim() == 1 and not logits_to_keep.is_floating_point():
            logits_to_keep = logits_to_keep.tolist()
        else:
            raise ValueError(f"logits_to_keep as a tensor must be 1-D integer positions; got shape "
                             f"{tuple(logits_to_keep.shape)}, {logits_to_keep.dtype}. {hint}")
    if isinstance(logits_to_keep, (list, tuple)):
        if not logits_to_keep:
            raise ValueError(f"logits_to_keep=[] keeps no position. {hint}")
        return [resolve_position(p, T, "logits_to_keep position") for p in logits_to_keep]
    if isinstance(logits_to_keep, bool):
        raise TypeError(f"logits_to_keep={logits_to_keep} is a bool. {hint}")
    n = check_int("logits_to_keep", logits_to_keep, low=0, hint=hint)
    if n > T:
        raise ValueError(f"logits_to_keep={n} asks for the last {n} positions of an input of {T} tokens. {hint}")
    return None if n == 0 else slice(T - n, T)


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
