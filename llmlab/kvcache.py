"""KV cache: keep every layer's keys and values so each new token computes only its own.

Without a cache, generating token t re-runs the whole prefix: O(t) work per token. The keys and
values of past tokens never change (a token only sees its past), so we store them and let the new
token's query attend to the stored ones.

Both caches have the same interface:
    cache.seq_len                         positions stored so far (in every layer)
    k_all, v_all = cache.update(i, k, v)  append k, v (B, n_kv_heads, T_new, hd) to layer i, return all of it
    cache.reset()                         forget everything

`seq_len` moves forward once the last layer has stored the new positions, so all layers of one
forward pass see the same starting position.

>>> import torch
>>> cache = GrowingKVCache(n_layers=1)
>>> k, v = cache.update(0, torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))   # prefill 3 positions
>>> k, v = cache.update(0, torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4))     # one new token
>>> k.shape, cache.seq_len
(torch.Size([1, 2, 4, 4]), 4)
"""
from __future__ import annotations

import torch


class GrowingKVCache:
    """The readable cache: torch.cat the new keys/values onto the old ones (a new tensor every step)."""

    def __init__(self, n_layers: int):
        self.n_layers = n_layers
        self.keys: list = [None] * n_layers
        self.values: list = [None] * n_layers

    @property
    def seq_len(self) -> int:
        last = self.keys[-1]
        return 0 if last is None else last.shape[2]

    def update(self, layer_idx: int, k: torch.Tensor, v: torch.Tensor):
        if self.keys[layer_idx] is None:
            self.keys[layer_idx], self.values[layer_idx] = k, v
        else:
            self.keys[layer_idx] = torch.cat([self.keys[layer_idx], k], dim=2)     # (B, nkv, T_past + T, hd)
            self.values[layer_idx] = torch.cat([self.values[layer_idx], v], dim=2)
        return self.keys[layer_idx], self.values[layer_idx]

    def reset(self):
        self.keys = [None] * self.n_layers
        self.values = [None] * self.n_layers

    @classmethod
    def for_model(cls, model, batch_size: int = 1, max_len: int | None = None) -> "GrowingKVCache":
        return cls(model.config.n_layers)


class StaticKVCache:
    """The fast cache: one (B, n_kv_heads, max_len, hd) buffer per layer, written in place.

    The buffers are allocated at the first update (with that tensor's batch size, device and dtype);
    after that a decode step writes one slice and returns a view -- no new memory, no copies of the past.
    """

    def __init__(self, n_layers: int, max_len: int):
        self.n_layers, self.max_len = n_layers, max_len
        self.keys: list = [None] * n_layers
        self.values: list = [None] * n_layers
        self.seq_len = 0

    def update(self, layer_idx: int, k: torch.Tensor, v: torch.Tensor):
        B, n_kv, T, hd = k.shape
        start, end = self.seq_len, self.seq_len + T
        if end > self.max_len:
            raise ValueError(f"StaticKVCache holds max_len={self.max_len} positions; writing {T} more after "
                             f"{start} would need {end}. Make the cache with a larger max_len.")
        if self.keys[layer_idx] is None:
            self.keys[layer_idx] = k.new_zeros(B, n_kv, self.max_len, hd)
            self.values[layer_idx] = v.new_zeros(B, n_kv, self.max_len, hd)
        self.keys[layer_idx][:, :, start:end] = k
        self.values[layer_idx][:, :, start:end] = v
        if layer_idx == self.n_layers - 1:
            self.seq_len = end
        return self.keys[layer_idx][:, :, :end], self.values[layer_idx][:, :, :end]  # views, (B, nkv, end, hd)

    def reset(self):
        self.seq_len = 0  # the buffers stay; old entries are overwritten before they are read again

    @classmethod
    def for_model(cls, model, batch_size: int = 1, max_len: int | None = None) -> "StaticKVCache":
        return cls(model.config.n_layers, max_len or model.config.max_seq_len)
