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
    cache.copy()                          an independent copy (one shared prefix, several continuations)
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
>>> twin = cache.copy()                                                       # its own tensors
>>> _ = twin.update(0, torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4))
>>> twin.seq_len, cache.seq_len
(5, 4)
"""
from __future__ import annotations

import torch

from llmlab.devices import get_dtype

__all__ = ["GrowingKVCache", "StaticKVCache"]


def kv_cache_bytes(config, T: int, batch: int = 1, dtype="bfloat16", sliding: bool = True) -> int:
    """Bytes of the keys and values a cache holds for `batch` sequences of T tokens (a config or a model).

    Every layer stores a key and a value vector per KV head and per position: 2 * n_kv_heads * head_dim
    numbers. Query heads are never cached, so GQA and MQA shrink the cache by n_heads / n_kv_heads.
    A sliding-window layer needs only its last `sliding_window` positions (sliding=False counts every
    position in every layer, as llmlab's two caches store them). dtype: what the cache stores
    ("bfloat16" as a model is usually served, "float32" as llmlab runs by default).

    >>> from llmlab.config import ModelConfig
    >>> kv_cache_bytes(ModelConfig.preset("smollm2-135m"), 1)        # 30 layers x 3 KV heads x 64 x 2 x 2
    23040
    >>> gemma = ModelConfig.preset("gemma3-270m")                    # 15 of its 18 layers see 512 tokens
    >>> kv_cache_bytes(gemma, 8192) / 2**20, kv_cache_bytes(gemma, 8192, sliding=False) / 2**20
    (31.5, 144.0)
    """
    config = getattr(config, "config", config)          # a Transformer carries its config
    for name in ("n_layers", "n_kv_heads", "head_dim", "layer_types"):
        if not hasattr(config, name):
            raise TypeError(f"kv_cache_bytes needs a ModelConfig (or a model); got {type(config).__name__}, "
                            f"which has no {name}. Try kv_cache_bytes(model.config, T).")
    for name, value in (("T", T), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number >= 0; got {value!r}.")
    per_position = 2 * config.n_kv_heads * config.head_dim * torch.empty(0, dtype=get_dtype(dtype)).element_size()
    stored = [min(T, config.sliding_window) if kind == "sliding" and sliding else T for kind in config.layer_types]
    return batch * per_position * sum(stored)


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

    def copy(self) -> "GrowingKVCache":
        """A deep copy: its own tensors, so updating either cache leaves the other as it was."""
        new = GrowingKVCache(self.n_layers)
        new.keys = [None if k is None else k.clone() for k in self.keys]
        new.values = [None if v is None else v.clone() for v in self.values]
        return new

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

    def copy(self) -> "StaticKVCache":
        """A deep copy: its own buffers (same max_len), so updating either cache leaves the other as it was."""
        new = StaticKVCache(self.n_layers, self.max_len)
        new.keys = [None if k is None else k.clone() for k in self.keys]
        new.values = [None if v is None else v.clone() for v in self.values]
        new.seq_len = self.seq_len
        return new

    @classmethod
    def for_model(cls, model, max_len: int | None = None) -> "StaticKVCache":
        return cls(model.config.n_layers, max_len or model.config.max_seq_len)
