"""The GGUF file's quantized bytes as the live model ships them: SmolLM2's file, its blocks, their expansion.

The site carries the file's own Q4_1 and Q8_0 blocks; the page expands them to float32 once with the
arithmetic below (the same as gguf.quants, which llmlab's loader uses), and export.py writes the recipe
that says which blocks make which weights.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from llmlab.gguf import open_reader, unpermute_qk

Q4_1_BLOCK, Q8_0_BLOCK = 20, 34   # bytes per block of 32 weights: (d, m, 16 bytes) and (d, 32 int8)
BLOCK_BYTES = {"q4_1": Q4_1_BLOCK, "q8_0": Q8_0_BLOCK}


def smollm2_gguf_path() -> Path:
    from llmlab.registry import offline_gguf_path, offline_model

    return offline_gguf_path(offline_model("smollm2-135m"))


def smollm2_config(reader=None):
    """llmlab's ModelConfig of the GGUF file (read from its header)."""
    from llmlab.convert import config_from_hf
    from llmlab.gguf import gguf_config_to_hf

    return config_from_hf(gguf_config_to_hf(reader if reader is not None else open_reader(smollm2_gguf_path())))


# ------------------------------------------------------------------ the GGUF bytes, reordered

def raw_blocks(tensor, block_bytes: int) -> np.ndarray:
    """A quantized GGUF tensor of N rows -> its blocks, (N, blocks per row, block_bytes) uint8."""
    N = int(tensor.shape[1])
    return np.asarray(tensor.data, dtype=np.uint8).reshape(N, -1, block_bytes)


def expand_blocks(kind: str, blocks: np.ndarray) -> np.ndarray:
    """Q4_1 or Q8_0 blocks (N, nb, bytes) -> float32 weights (N, nb * 32), as gguf.quants computes them.

    >>> block = np.zeros((1, 1, 20), np.uint8); block[0, 0, 1] = 0x3c; block[0, 0, 4] = 0x21   # d = 1, q0 = 1, q16 = 2
    >>> expand_blocks("q4_1", block)[0, [0, 16]].tolist()
    [1.0, 2.0]
    """
    d = blocks[..., 0:2].copy().view(np.float16).astype(np.float32)               # (N, nb, 1)
    if kind == "q4_1":
        m = blocks[..., 2:4].copy().view(np.float16).astype(np.float32)
        qs = blocks[..., 4:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32)        # (N, nb, 32): j, then j + 16
        w = d * q + m
    elif kind == "q8_0":
        w = d * blocks[..., 2:].copy().view(np.int8).astype(np.float32)
    else:
        raise ValueError(f"expand_blocks knows 'q4_1' and 'q8_0', got {kind!r}.")
    return w.reshape(w.shape[0], -1)


def unpermute_rows(array: np.ndarray, n_heads: int) -> np.ndarray:
    """llmlab.gguf.unpermute_qk on the first axis of any array (whole rows of blocks move)."""
    import torch

    order = unpermute_qk(torch.arange(array.shape[0]).reshape(-1, 1).float(), n_heads)[:, 0].long().numpy()
    return array[order]
