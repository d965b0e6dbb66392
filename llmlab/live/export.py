"""SmolLM2-135M as an ONNX graph that keeps the GGUF file's own quantized numbers.

The graph is written node by node from llmlab's ModelConfig, one block at a time, in the same
order as ``llmlab.block`` (RMSNorm, attention with RoPE and grouped queries, RMSNorm, SwiGLU).

How the weights stay small *and* exact:

- Q4_1 linears (every W_q, W_k, W_v, W_o and FFN matrix). A block of 32 weights stores a scale d,
  a minimum m and 32 integers q in 0..15, and means w = d * q + m. onnxruntime's ``MatMulNBits``
  multiplies by 4-bit weights without expanding them, but computes w = d * (q - 8). So each
  linear is ``MatMulNBits`` plus an exact correction for the rest, (8 d + m), which is constant
  inside a block:  x @ w^T = MatMulNBits(x) + blocksum(x) @ (8 d + m)^T, where blocksum adds
  x's 32 entries of each block. Only the nibbles are reordered (GGUF puts elements j and j+16
  in one byte, MatMulNBits elements 2i and 2i+1); the numbers are the file's.
- The Q8_0 token embedding (tied to the LM head): int8 integers q and one scale d per 32. With
  u = q + 128 (0..255) split into two 4-bit halves, u = 16 hi + lo, the LM head is two 4-bit
  ``MatMulNBits`` plus the block sums' part again: (u - 128) d = 16 d (hi - 8) + d (lo - 8) + 8 d.
  The halves are the same bytes as u (onnxruntime expands an 8-bit MatMulNBits to float32 on
  every call, 0.6 s for this table; two 4-bit ones are about 100 times faster). The embedding
  gathers the rows of both halves and computes (16 hi + lo - 128) d.
- llama.cpp's permuted rows of W_q and W_k are put back (``llmlab.gguf.unpermute_qk``): whole
  rows of blocks move, no number changes.

    path = export_onnx("/tmp/live")                  # model.onnx + model.data.0, model.data.1, ...
    out = run_onnx(path, [504, 3458, 314])           # dict of numpy arrays, names in LIVE_OUTPUTS
    step = run_onnx(path, [253], past=(out["present_keys"], out["present_values"]))   # one more token

One graph serves both writing and looking. Inputs, for T new tokens after P cached ones (S = P + T),
L = 30 blocks, H = 9 heads, KV = 3 key/value heads, D = 576:
    input_ids (T,)                   the new tokens
    past_keys, past_values (L, KV, P, hd)   the cache (P = 0 for a prompt)
    head_mask (L, H)                 1 keeps a head, 0 zeroes its output before W_o (a knock-out)
    steer (L, D)                     added to the residual stream after each block, every position
    attention_rows (1,)              T: return the new tokens' attention weights; 0: skip them
    readout_rows (n,), n >= 1        rows of the streams stacked layer by layer ((L+1) T rows,
                                     embedding first) to read out; the first is the next token's
    lens_target (1,)                 a token id whose probability and rank each readout row reports
Outputs:
    logits (V,)                      the first readout row's logits (the next token's, usually)
    resid (L+1, D)                   the residual stream at the last position, embedding first
    present_keys, present_values (L, KV, S, hd)   the cache for the next call
    attention (L, H, R, S)           R = attention_rows: every block's weights, rows sum to 1
    lens_ids, lens_probs (n, k)      each readout row's top k = 5 tokens (the logit lens)
    lens_target_probs, lens_target_ranks (n,)   lens_target's probability and rank (0 = top)
A decode step (T = 1, attention_rows 0, one readout row) costs one token's worth of work.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from llmlab.gguf import open_reader, unpermute_qk
from llmlab.positions import rope_cos_sin

CONTEXT = 1024            # longest text (prompt + written tokens) the live model's cache holds
MAX_TOKENS = 256          # longest prompt a view reads whole (attention weights grow as T^2)
LENS_K = 5                # top tokens per layer in the logit lens
CHUNK_BYTES = 40 << 20    # weight files of at most 40 MiB (43 MiB once written as script files)
LIVE_INPUTS = ("input_ids", "past_keys", "past_values", "head_mask", "steer", "attention_rows",
               "readout_rows", "lens_target")
LIVE_OUTPUTS = ("logits", "resid", "present_keys", "present_values", "attention", "lens_ids", "lens_probs",
                "lens_target_probs", "lens_target_ranks")
Q4_1_BLOCK, Q8_0_BLOCK = 20, 34   # bytes per block of 32 weights: (d, m, 16 bytes) and (d, 32 int8)


def smollm2_gguf_path() -> Path:
    from llmlab.registry import offline_gguf_path, offline_model

    return offline_gguf_path(offline_model("smollm2-135m"))


def smollm2_config(reader=None):
    """llmlab's ModelConfig of the GGUF file (read from its header)."""
    from llmlab.convert import config_from_hf
    from llmlab.gguf import gguf_config_to_hf

    return config_from_hf(gguf_config_to_hf(reader if reader is not None else open_reader(smollm2_gguf_path())))


# ------------------------------------------------------------------ the GGUF bytes, reordered

def q4_1_parts(tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A Q4_1 tensor (N rows of K) -> packed nibbles (N, K/32, 16) uint8, d and m (N, K/32) float16.

    >>> block = np.zeros(20, np.uint8); block[4] = 0x21        # GGUF: q0 = 1 (low nibble), q16 = 2 (high)
    >>> packed, _, _ = _q4_1_split(block.reshape(1, 1, 20))      # MatMulNBits: q0 in byte 0, q16 in byte 8
    >>> int(packed[0, 0, 0]), int(packed[0, 0, 8])
    (1, 2)
    """
    N = int(tensor.shape[1])
    blocks = np.asarray(tensor.data, dtype=np.uint8).reshape(N, -1, Q4_1_BLOCK)  # (N, K/32, 20)
    return _q4_1_split(blocks)


def _q4_1_split(blocks: np.ndarray):
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0]              # (N, nb)
    m = blocks[..., 2:4].copy().view(np.float16)[..., 0]              # (N, nb)
    qs = blocks[..., 4:]                                              # (N, nb, 16)
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)            # (N, nb, 32) element j at j
    packed = values[..., 0::2] | (values[..., 1::2] << 4)             # (N, nb, 16) MatMulNBits order
    return packed.astype(np.uint8), d, m


def q8_0_parts(tensor) -> tuple[np.ndarray, np.ndarray]:
    """A Q8_0 tensor (V rows of d) -> int8 (V, d/32, 32) and scales (V, d/32, 1) float16."""
    V = int(tensor.shape[1])
    blocks = np.asarray(tensor.data, dtype=np.uint8).reshape(V, -1, Q8_0_BLOCK)  # (V, nb, 34)
    d = blocks[..., 0:2].copy().view(np.float16)                       # (V, nb, 1)
    q = blocks[..., 2:].copy().view(np.int8)                           # (V, nb, 32)
    return q, d


def pack_nibbles(values: np.ndarray) -> np.ndarray:
    """(..., 32) integers 0..15 -> (..., 16) bytes in MatMulNBits order (elements 2i, 2i+1 in byte i)."""
    return (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)


def unpermute_rows(array: np.ndarray, n_heads: int) -> np.ndarray:
    """llmlab.gguf.unpermute_qk on the first axis of any array (whole rows of blocks move)."""
    import torch

    order = unpermute_qk(torch.arange(array.shape[0]).reshape(-1, 1).float(), n_heads)[:, 0].long().numpy()
    return array[order]


# ------------------------------------------------------------------ a small graph writer

class Graph:
    """Collects nodes and initializers with unique names; `op` returns the output name(s)."""

    def __init__(self):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes, self.initializers, self.count = [], [], 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, hint: str, array: np.ndarray) -> str:
        name = self.name(hint)
        self.initializers.append(self.numpy_helper.from_array(np.array(array, order="C"), name))  # 0-d stays 0-d
        return name

    def op(self, op_type: str, *inputs: str, outputs: int | list = 1, domain: str = "", **attrs):
        names = outputs if isinstance(outputs, list) else [self.name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(self.helper.make_node(op_type, list(inputs), names, domain=domain, **attrs))
        return names[0] if len(names) == 1 else names

    def ints(self, *values: int) -> str:
        return self.const("shape", np.array(values, dtype=np.int64))

    def scalar(self, value: float) -> str:
        return self.const("c", np.array(value, dtype=np.float32))


def rms_norm(g: Graph, x: str, weight: np.ndarray, eps: float) -> str:
    """x / sqrt(mean(x^2) + eps) * w over the last axis (llmlab.norms.rms_norm)."""
    mean_sq = g.op("ReduceMean", g.op("Mul", x, x), axes=[-1], keepdims=1)             # (T, 1)
    inv = g.op("Reciprocal", g.op("Sqrt", g.op("Add", mean_sq, g.scalar(eps))))
    return g.op("Mul", g.op("Mul", x, inv), g.const("norm_w", weight.astype(np.float32)))


def q4_linear(g: Graph, x: str, packed: np.ndarray, d: np.ndarray, m: np.ndarray) -> str:
    """x (T, K) @ w^T for a Q4_1 w (N, K): MatMulNBits (q - 8) * d, plus blocksum(x) @ (8 d + m)^T."""
    N, nb, _ = packed.shape
    K = nb * 32
    d32 = g.op("Cast", g.const("q4_d", d), to=1)                                      # (N, nb) float32
    scales = g.op("Reshape", d32, g.ints(N * nb))
    y = g.op("MatMulNBits", x, g.const("q4_packed", packed), scales, domain="com.microsoft",
             K=K, N=N, bits=4, block_size=32)                                          # (T, N)
    rest = g.op("Add", g.op("Mul", d32, g.scalar(8.0)), g.op("Cast", g.const("q4_m", m), to=1))  # (N, nb)
    block_sums = g.op("ReduceSum", g.op("Reshape", x, g.ints(-1, nb, 32)), g.ints(-1), keepdims=0)  # (T, nb)
    return g.op("Add", y, g.op("MatMul", block_sums, g.op("Transpose", rest, perm=[1, 0])))  # (T, N)


def rope(g: Graph, x: str, cos: str, sin: str, half: int) -> str:
    """x * cos + rotate_half(x) * sin, x (heads, T, hd); rotate_half(x) = (-x2, x1)."""
    x1 = g.op("Slice", x, g.ints(0), g.ints(half), g.ints(-1))
    x2 = g.op("Slice", x, g.ints(half), g.ints(2 * half), g.ints(-1))
    rotated = g.op("Concat", g.op("Neg", x2), x1, axis=-1)
    return g.op("Add", g.op("Mul", x, cos), g.op("Mul", rotated, sin))


# ------------------------------------------------------------------ the model

def build_graph(reader, config) -> "onnx.ModelProto":  # noqa: F821
    """The whole SmolLM2 forward pass with a KV cache and the live outputs (see the module docstring)."""
    from onnx import TensorProto, helper

    c = config
    H, KV, hd, D, L = c.n_heads, c.n_kv_heads, c.head_dim, c.d_model, c.n_layers
    tensors = {t.name: t for t in reader.tensors}
    g = Graph()

    def linear(name: str, x: str, heads: int | None = None) -> str:
        packed, d, m = q4_1_parts(tensors[name])
        if heads is not None:  # W_q / W_k: llama.cpp's row order back to llmlab's
            packed, d, m = (unpermute_rows(a, heads) for a in (packed, d, m))
        return q4_linear(g, x, packed, d, m)

    def norm_weight(name: str) -> np.ndarray:
        return np.asarray(tensors[name].data, dtype=np.float32)

    # The new tokens sit at positions P .. P+T-1, after the P cached ones; S = P + T keys in all.
    T = g.op("Shape", "input_ids")                                                    # [T]
    P = g.op("Slice", g.op("Shape", "past_keys"), g.ints(2), g.ints(3), g.ints(0))     # [P]
    S = g.op("Add", P, T)                                                              # [S]
    zero = g.ints(0)
    # RoPE: slices of llmlab's own tables for CONTEXT positions (stored once, half of each: the two
    # halves of a row share one angle).
    cos, sin = rope_cos_sin(CONTEXT, hd, base=c.rope_theta)                            # (CONTEXT, hd) each
    def table(hint, full):
        half = g.const(hint, full.numpy()[:, : hd // 2].copy())
        return g.op("Slice", g.op("Concat", half, half, axis=-1), P, S, zero)          # (T, hd)
    cos, sin = table("rope_cos", cos), table("rope_sin", sin)
    # Causal mask (T, S): key j is hidden from the new token i when j > P + i.
    keys = g.op("Range", g.op("Squeeze", zero), g.op("Squeeze", S, zero), g.op("Squeeze", g.ints(1)))
    rows = g.op("Range", g.op("Squeeze", P, zero), g.op("Squeeze", S, zero), g.op("Squeeze", g.ints(1)))
    hidden = g.op("Greater", g.op("Unsqueeze", keys, zero), g.op("Unsqueeze", rows, g.ints(1)))  # (T, S)
    mask = g.op("Where", hidden, g.scalar(float("-inf")), g.scalar(0.0))

    # Token embedding, tied to the LM head: Q8_0's int8 q and scale d per 32, stored as u = q + 128 split
    # into two 4-bit halves, u = 16 hi + lo, each packed as MatMulNBits reads 4-bit weights (the same
    # bytes as u; onnxruntime multiplies by 4-bit weights fast, by 8-bit ones only after expanding them).
    emb_q, emb_d = q8_0_parts(tensors["token_embd.weight"])                           # (V, nb, 32), (V, nb, 1)
    emb_u = (emb_q.astype(np.int16) + 128).astype(np.uint8)                           # q + 128, in 0..255
    V, nb = emb_u.shape[0], emb_u.shape[1]
    hi_name, lo_name = (g.const(hint, pack_nibbles(half)) for hint, half in (("embed_hi", emb_u >> 4),
                                                                             ("embed_lo", emb_u & 0x0F)))
    emb_d_name = g.const("embed_d", emb_d)
    def unpack(name):                                                                 # rows of ids -> (T, nb, 32)
        packed = g.op("Cast", g.op("Gather", name, "input_ids"), to=1)                # (T, nb, 16)
        even = g.op("Mod", packed, g.scalar(16.0), fmod=1)                            # element 2i: low nibble
        odd = g.op("Mul", g.op("Sub", packed, even), g.scalar(1 / 16))                # element 2i+1: high nibble
        pairs = g.op("Concat", g.op("Unsqueeze", even, g.ints(-1)), g.op("Unsqueeze", odd, g.ints(-1)), axis=-1)
        return g.op("Reshape", pairs, g.ints(-1, nb, 32))
    u = g.op("Add", g.op("Mul", unpack(hi_name), g.scalar(16.0)), unpack(lo_name))   # (T, nb, 32), exact integers
    rows_ = g.op("Mul", g.op("Sub", u, g.scalar(128.0)),
                 g.op("Cast", g.op("Gather", emb_d_name, "input_ids"), to=1))          # (T, nb, 32): (u - 128) d
    x = g.op("Reshape", rows_, g.ints(-1, D))                                          # (T, D)

    attention_end = g.op("Reshape", "attention_rows", g.ints(1))                       # [R]: 0 or T
    streams, patterns, present_k, present_v = [x], [], [], []
    for i in range(L):
        layer = g.ints(i)
        h = rms_norm(g, x, norm_weight(f"blk.{i}.attn_norm.weight"), c.norm_eps)
        q = linear(f"blk.{i}.attn_q.weight", h, heads=H)                               # (T, H*hd)
        k = linear(f"blk.{i}.attn_k.weight", h, heads=KV)                              # (T, KV*hd)
        v = linear(f"blk.{i}.attn_v.weight", h)
        q = g.op("Transpose", g.op("Reshape", q, g.ints(-1, H, hd)), perm=[1, 0, 2])    # (H, T, hd)
        k = g.op("Transpose", g.op("Reshape", k, g.ints(-1, KV, hd)), perm=[1, 0, 2])   # (KV, T, hd)
        v = g.op("Transpose", g.op("Reshape", v, g.ints(-1, KV, hd)), perm=[1, 0, 2])
        q, k = rope(g, q, cos, sin, hd // 2), rope(g, k, cos, sin, hd // 2)
        # The cache: this block's past keys and values, then the new ones (what the next call gets back).
        k = g.op("Concat", g.op("Squeeze", g.op("Gather", "past_keys", layer, axis=0), zero), k, axis=1)    # (KV, S, hd)
        v = g.op("Concat", g.op("Squeeze", g.op("Gather", "past_values", layer, axis=0), zero), v, axis=1)
        present_k.append(g.op("Unsqueeze", k, zero))
        present_v.append(g.op("Unsqueeze", v, zero))
        # Grouped queries: query head j reads key/value head j // (H / KV) (llmlab's repeat_kv).
        def repeat(t):
            wide = g.op("Expand", g.op("Unsqueeze", t, g.ints(1)), g.ints(KV, H // KV, 1, 1))  # (KV, H/KV, S, hd)
            return g.op("Reshape", wide, g.ints(H, -1, hd))                                    # (H, S, hd)
        k, v = repeat(k), repeat(v)
        scores = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 2, 1])), g.scalar(hd ** -0.5))
        weights = g.op("Softmax", g.op("Add", scores, mask), axis=-1)                  # (H, T, S)
        kept = g.op("Slice", weights, zero, attention_end, g.ints(1))                  # (H, R, S): R = 0 or T
        patterns.append(g.op("Unsqueeze", kept, zero))                                 # (1, H, R, S)
        # Knock-outs: head_mask[i, j] = 0 zeroes head j's output before W_o (llmlab's hook_z).
        keep = g.op("Reshape", g.op("Gather", "head_mask", layer, axis=0), g.ints(H, 1, 1))   # (H, 1, 1)
        heads_out = g.op("Mul", g.op("MatMul", weights, v), keep)                      # (H, T, hd)
        z = g.op("Reshape", g.op("Transpose", heads_out, perm=[1, 0, 2]), g.ints(-1, H * hd))
        x = g.op("Add", x, linear(f"blk.{i}.attn_output.weight", z))                   # (T, D)
        h = rms_norm(g, x, norm_weight(f"blk.{i}.ffn_norm.weight"), c.norm_eps)
        gate, up = linear(f"blk.{i}.ffn_gate.weight", h), linear(f"blk.{i}.ffn_up.weight", h)  # (T, d_ff)
        act = g.op("Mul", g.op("Mul", gate, g.op("Sigmoid", gate)), up)               # SwiGLU
        x = g.op("Add", x, linear(f"blk.{i}.ffn_down.weight", act))                    # (T, D)
        # Steering: steer[i] is added to the block's output at every position (llmlab's resid_post hook).
        x = g.op("Add", x, g.op("Gather", "steer", layer, axis=0))                     # (T, D)
        streams.append(x)

    g.op("Concat", *present_k, axis=0, outputs=["present_keys"])                       # (L, KV, S, hd)
    g.op("Concat", *present_v, axis=0, outputs=["present_values"])
    g.op("Concat", *patterns, axis=0, outputs=["attention"])                           # (L, H, R, S)
    last = g.ints(-1)
    g.op("Concat", *[g.op("Gather", s, last, axis=0) for s in streams], axis=0, outputs=["resid"])  # (L+1, D)

    # One readout (final norm, then the tied LM head) for the next token and for the logit lens.
    norm_w = norm_weight("output_norm.weight")
    # w = (u - 128) d = 16 d (hi - 8) + d (lo - 8) + 8 d: two 4-bit products and the block sums' part.
    d32 = g.op("Cast", emb_d_name, to=1)                                               # (V, nb, 1)
    d_flat = g.op("Reshape", d32, g.ints(V * nb))
    rest = g.op("Transpose", g.op("Reshape", g.op("Mul", d32, g.scalar(8.0)), g.ints(V, nb)), perm=[1, 0])  # (nb, V)

    def readout(rows):                                                                 # (n, D) -> (n, V)
        h = rms_norm(g, rows, norm_w, c.norm_eps)
        high = g.op("MatMulNBits", h, hi_name, g.op("Mul", d_flat, g.scalar(16.0)), domain="com.microsoft",
                    K=D, N=V, bits=4, block_size=32)
        low = g.op("MatMulNBits", h, lo_name, d_flat, domain="com.microsoft", K=D, N=V, bits=4, block_size=32)
        block_sums = g.op("ReduceSum", g.op("Reshape", h, g.ints(-1, nb, 32)), g.ints(-1), keepdims=0)  # (n, nb)
        return g.op("Add", g.op("Add", high, low), g.op("MatMul", block_sums, rest))

    # The readout rows: row r = layer * T + position of every stream stacked (embedding first), at
    # least one. The first is the one whose whole distribution comes back (usually the model's output
    # at the last position); every row gets its top LENS_K tokens (the logit lens).
    stacked = g.op("Concat", *streams, axis=0)                                         # ((L+1) T, D)
    logits = readout(g.op("Gather", stacked, "readout_rows", axis=0))                  # (n, V)
    g.op("Gather", logits, g.const("first_row", np.array(0, np.int64)), axis=0, outputs=["logits"])  # (V,)
    probs = g.op("Softmax", logits, axis=-1)                                           # (n, V)
    g.op("TopK", probs, g.ints(LENS_K), axis=-1, outputs=["lens_probs", "lens_ids"])   # (n, k)
    target_p = g.op("Gather", probs, "lens_target", axis=1)                            # (n, 1)
    target_logit = g.op("Gather", logits, "lens_target", axis=1)                       # rank by logits (far-off
    better = g.op("ReduceSum", g.op("Cast", g.op("Greater", logits, target_logit), to=7),  # probabilities tie at 0)
                  g.ints(-1), keepdims=0)
    g.op("Reshape", target_p, g.ints(-1), outputs=["lens_target_probs"])               # (n,)
    g.op("Identity", better, outputs=["lens_target_ranks"])                            # 0 = the top token

    F, I = TensorProto.FLOAT, TensorProto.INT64
    info = helper.make_tensor_value_info
    inputs = [info("input_ids", I, ["T"]), info("past_keys", F, [L, KV, "P", hd]),
              info("past_values", F, [L, KV, "P", hd]), info("head_mask", F, [L, H]), info("steer", F, [L, D]),
              info("attention_rows", I, [1]), info("readout_rows", I, ["n"]), info("lens_target", I, [1])]
    outputs = [info("logits", F, [V]), info("resid", F, [L + 1, D]),
               info("present_keys", F, [L, KV, "S", hd]), info("present_values", F, [L, KV, "S", hd]),
               info("attention", F, [L, H, "R", "S"]),
               info("lens_ids", I, ["n", LENS_K]), info("lens_probs", F, ["n", LENS_K]),
               info("lens_target_probs", F, ["n"]), info("lens_target_ranks", I, ["n"])]
    graph = helper.make_graph(g.nodes, "smollm2_135m_live", inputs, outputs, g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                              producer_name="llmlab.live")
    model.ir_version = 8
    return model


def save_chunked(model, folder: Path, stem: str = "model", chunk_bytes: int = CHUNK_BYTES) -> list[Path]:
    """Write the graph to folder/stem.onnx and its initializers to stem.data.0, .1, ... (each <= chunk_bytes)."""
    from onnx import TensorProto, save_model

    folder.mkdir(parents=True, exist_ok=True)
    files, handle, used = [], None, chunk_bytes
    for tensor in model.graph.initializer:
        data = tensor.raw_data
        if len(data) < 4096:            # small constants stay inside the graph file
            continue
        if len(data) > chunk_bytes:
            raise ValueError(f"Tensor {tensor.name} has {len(data)} bytes, more than a chunk ({chunk_bytes}).")
        if used + len(data) > chunk_bytes:
            if handle:
                handle.close()
            files.append(folder / f"{stem}.data.{len(files)}")
            handle, used = open(files[-1], "wb"), 0
        offset = used
        handle.write(data)
        used += len(data)
        tensor.ClearField("raw_data")
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", files[-1].name), ("offset", str(offset)), ("length", str(len(data)))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
    if handle:
        handle.close()
    graph_path = folder / f"{stem}.onnx"
    save_model(model, os.fspath(graph_path))
    return [graph_path, *files]


def export_onnx(folder: str | os.PathLike, gguf_path: str | os.PathLike | None = None) -> Path:
    """Write SmolLM2-135M's live graph and weights into `folder`; returns the .onnx file's path."""
    reader = open_reader(gguf_path or smollm2_gguf_path())
    config = smollm2_config(reader)
    if config.family != "llama" or config.norm != "rms" or config.ffn != "swiglu" or not config.tie_embeddings:
        raise ValueError(f"export_onnx writes SmolLM2-style models (llama family, RMSNorm, SwiGLU, tied "
                         f"embeddings); this file's config is family={config.family!r}, norm={config.norm!r}, "
                         f"ffn={config.ffn!r}, tie_embeddings={config.tie_embeddings}.")
    return save_chunked(build_graph(reader, config), Path(folder))[0]


def run_onnx(path: str | os.PathLike, ids, session=None, past=None, ablate=(), steer=None,
             attention: bool = True, lens_positions=(-1,), lens_target: int = 0) -> dict:
    """Run the exported graph with onnxruntime on one prompt's ids; returns {output name: array}.

    past: (keys, values) from an earlier call's present_keys / present_values (None: an empty cache);
    ablate: [(layer, head), ...] heads to knock out; steer: (L, D) added after each block (or None);
    attention: return the new tokens' attention rows; lens_positions: where to read the logit lens
    (positions of `ids`, -1 the last); lens_target: a token id whose lens rank and probability to report.
    """
    import onnxruntime

    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    if session is None:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        session = onnxruntime.InferenceSession(os.fspath(path), options, providers=["CPUExecutionProvider"])
    shapes = {i.name: i.shape for i in session.get_inputs()}
    L, KV, _, hd = shapes["past_keys"]
    H, D = shapes["head_mask"][1], shapes["steer"][1]
    if past is None:
        past = (np.zeros((L, KV, 0, hd), np.float32),) * 2
    P = past[0].shape[2]
    if not 1 <= ids.size or P + ids.size > CONTEXT:
        raise ValueError(f"The live model takes 1 to {CONTEXT} tokens in all (cache + new); got {P} cached and "
                         f"{ids.size} new. Shorten the prompt.")
    head_mask = np.ones((L, H), np.float32)
    for layer, head in ablate:
        head_mask[layer, head] = 0.0
    steer = np.zeros((L, D), np.float32) if steer is None else np.asarray(steer, np.float32)
    T = ids.size
    positions = [p % T for p in lens_positions]
    rows = [L * T + T - 1] + [layer * T + p for layer in range(L + 1) for p in positions]
    feeds = dict(input_ids=ids, past_keys=past[0], past_values=past[1], head_mask=head_mask, steer=steer,
                 attention_rows=np.array([ids.size if attention else 0], np.int64),
                 readout_rows=np.asarray(rows, np.int64), lens_target=np.array([lens_target], np.int64))
    out = dict(zip(LIVE_OUTPUTS, session.run(list(LIVE_OUTPUTS), feeds)))
    for name in ("lens_ids", "lens_probs", "lens_target_probs", "lens_target_ranks"):   # (L+1, n, ...) grids
        out[name] = out[name][1:].reshape(L + 1, len(positions), *out[name].shape[1:])
    return out
