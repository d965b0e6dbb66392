"""KV cache: keep every layer's keys and values so each new token computes only its own.

Without a cache, generating token t re-runs the whole prefix: O(t) work per token. The keys and
values of past tokens never change (a token only sees its past), so we store them and let the new
token's query attend to the stored ones.

Both caches have the same interface (use these; do not assign keys, values or seq_len):
    cache.seq_len                         positions stored so far (in every layer)
    k_all, v_all = cache.update(i, k, v)  append k, v (B, n_kv_heads, T_new, hd) to layer i, return all of it
    cache.crop(n)                         keep the first n positions (e.g. drop rejected draft tokens)
    cache.expand(batch_size)              a batch-1 cache becomes batch_size copies (one prefix, many continuations)
    cache.reorder(rows)                   keep the rows `rows` (B_new,) of the batch, in that order (beam search)
    cache.memory_bytes()                  bytes its keys and values take
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

__all__ = ["GrowingKVCache", "StaticKVCache"]


def _check_crop(n, seq_len: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= seq_len:
        raise ValueError(f"crop keeps the first n positions, 0 <= n <= seq_len={seq_len}; got {n!r}.")
    return n


def _check_expand(keys: list, batch_size) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number >= 1; got {batch_size!r}.")
    stored = next((k.shape[0] for k in keys if k is not None), None)
    if stored is None:
        raise ValueError("expand needs a filled cache: prefill the shared prefix first (batch 1), then expand.")
    if stored != 1:
        raise ValueError(f"expand turns a batch-1 cache into copies; this cache holds a batch of {stored}.")
    return batch_size


def _reorder(tensors: list, rows) -> list:
    rows = torch.as_tensor(rows, dtype=torch.long)
    if rows.dim() != 1 or rows.numel() == 0:
        raise ValueError(f"rows must be a non-empty 1-D list of batch rows to keep; got shape {tuple(rows.shape)}.")
    return [None if t is None else t.index_select(0, rows.to(t.device)) for t in tensors]  # (B_new, nkv, T, hd)


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

    def crop(self, n: int) -> None:
        """Keep the first n positions of every layer."""
        n = _check_crop(n, self.seq_len)
        self.keys = [None if k is None else k[:, :, :n] for k in self.keys]
        self.values = [None if v is None else v[:, :, :n] for v in self.values]

    def expand(self, batch_size: int) -> None:
        """Batch 1 -> batch_size rows that share the stored past (views: the next update copies them)."""
        batch_size = _check_expand(self.keys, batch_size)
        self.keys = [None if k is None else k.expand(batch_size, -1, -1, -1) for k in self.keys]
        self.values = [None if v is None else v.expand(batch_size, -1, -1, -1) for v in self.values]

    def reorder(self, rows) -> None:
        """Keep batch rows `rows` in that order (a row may repeat): beams dropped or copied."""
        self.keys, self.values = _reorder(self.keys, rows), _reorder(self.values, rows)

    def memory_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values if t is not None)

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
    def for_model(cls, model, max_len: int | None = None) -> "GrowingKVCache":
        """A cache for `model` (max_len is accepted so both classes build alike; a growing cache has no limit)."""
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

    def crop(self, n: int) -> None:
        """Keep the first n positions: the next update writes at position n (later entries are overwritten)."""
        self.seq_len = _check_crop(n, self.seq_len)

    def expand(self, batch_size: int) -> None:
        """Batch 1 -> batch_size rows, each its own copy of the stored past (the buffers are written in place)."""
        batch_size = _check_expand(self.keys, batch_size)
        self.keys = [None if k is None else k.repeat(batch_size, 1, 1, 1) for k in self.keys]
        self.values = [None if v is None else v.repeat(batch_size, 1, 1, 1) for v in self.values]

    def reorder(self, rows) -> None:
        """Keep batch rows `rows` in that order (a row may repeat): beams dropped or copied."""
        self.keys, self.values = _reorder(self.keys, rows), _reorder(self.values, rows)

    def memory_bytes(self) -> int:
        """Bytes of the preallocated buffers (all max_len positions, used or not)."""
        return sum(t.numel() * t.element_size() for t in self.keys + self.values if t is not None)

    @classmethod
    def for_model(cls, model, max_len: int | None = None) -> "StaticKVCache":
        return cls(model.config.n_layers, max_len or model.config.max_seq_len)
