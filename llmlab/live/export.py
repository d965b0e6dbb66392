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
- The Q8_0 token embedding (tied to the LM head): int8 integers q and one scale d per 32, stored
  as q + 128 (uint8). The embedding gathers rows and computes (u - 128) d; the LM head is
  ``MatMulNBits`` with 8 bits, whose default zero point is 128, so it computes the same numbers
  without ever expanding the 49152 x 576 table to float32.
- llama.cpp's permuted rows of W_q and W_k are put back (``llmlab.gguf.unpermute_qk``): whole
  rows of blocks move, no number changes.

    path = export_onnx("/tmp/live")                  # model.onnx + model.data.0, model.data.1, ...
    out = run_onnx(path, [504, 3458, 314])           # dict of numpy arrays, names in LIVE_OUTPUTS

Outputs, for a prompt of T tokens (T <= MAX_TOKENS), L = 30 blocks, H = 9 heads, k = 5:
    logits (V,), probs (V,)     the next token after the last position (probs = softmax(logits))
    attention (L, H, T, T)      every block's attention weights, rows sum to 1
    lens_ids, lens_probs (L+1, k)  the logit lens at the last position: embedding first, then
                                after each block (the last row is the model's own output)
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from llmlab.gguf import open_reader, unpermute_qk
from llmlab.positions import rope_cos_sin

MAX_TOKENS = 128          # longest prompt the live model accepts (attention output grows as T^2)
LENS_K = 5                # top tokens per layer in the logit lens
CHUNK_BYTES = 40 << 20    # weight files of at most 40 MiB (43 MiB once written as script files)
LIVE_OUTPUTS = ("logits", "probs", "attention", "lens_ids", "lens_probs")
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
    """The whole SmolLM2 forward pass with the live outputs (see the module docstring)."""
    from onnx import TensorProto, helper

    c = config
    H, KV, hd, D = c.n_heads, c.n_kv_heads, c.head_dim, c.d_model
    tensors = {t.name: t for t in reader.tensors}
    g = Graph()

    def linear(name: str, x: str, heads: int | None = None) -> str:
        packed, d, m = q4_1_parts(tensors[name])
        if heads is not None:  # W_q / W_k: llama.cpp's row order back to llmlab's
            packed, d, m = (unpermute_rows(a, heads) for a in (packed, d, m))
        return q4_linear(g, x, packed, d, m)

    def norm_weight(name: str) -> np.ndarray:
        return np.asarray(tensors[name].data, dtype=np.float32)

    # Positions 0..T-1: slices of tables for MAX_TOKENS positions computed by llmlab itself.
    shape = g.op("Shape", "input_ids")                                                # [T]
    zero = g.ints(0)
    cos, sin = rope_cos_sin(MAX_TOKENS, hd, base=c.rope_theta)                        # (MAX, hd) each
    cos = g.op("Slice", g.const("rope_cos", cos.numpy()), zero, shape, zero)          # (T, hd)
    sin = g.op("Slice", g.const("rope_sin", sin.numpy()), zero, shape, zero)
    causal = np.triu(np.full((MAX_TOKENS, MAX_TOKENS), -np.inf, np.float32), k=1)     # 0 on and below the diagonal
    mask = g.op("Slice", g.const("causal", causal), g.ints(0, 0), g.op("Concat", shape, shape, axis=0), g.ints(0, 1))

    # Token embedding: gather 8-bit rows and their scales, multiply (exactly the file's numbers). The
    # integers are stored shifted by 128 (uint8), the form MatMulNBits reads for the LM head below.
    emb_q, emb_d = q8_0_parts(tensors["token_embd.weight"])                           # (V, nb, 32), (V, nb, 1)
    emb_u = (emb_q.astype(np.int16) + 128).astype(np.uint8)                           # q + 128, in 0..255
    emb_u_name, emb_d_name = g.const("embed_u", emb_u), g.const("embed_d", emb_d)
    shifted = g.op("Cast", g.op("Gather", emb_u_name, "input_ids"), to=1)             # (T, nb, 32)
    rows = g.op("Mul", g.op("Sub", shifted, g.scalar(128.0)),
                g.op("Cast", g.op("Gather", emb_d_name, "input_ids"), to=1))           # (T, nb, 32)
    x = g.op("Reshape", rows, g.ints(-1, D))                                           # (T, D)

    last = g.ints(-1)
    lens_rows, patterns = [g.op("Gather", x, last, axis=0)], []                       # (1, D) each
    for i in range(c.n_layers):
        h = rms_norm(g, x, norm_weight(f"blk.{i}.attn_norm.weight"), c.norm_eps)
        q = linear(f"blk.{i}.attn_q.weight", h, heads=H)                               # (T, H*hd)
        k = linear(f"blk.{i}.attn_k.weight", h, heads=KV)                              # (T, KV*hd)
        v = linear(f"blk.{i}.attn_v.weight", h)
        q = g.op("Transpose", g.op("Reshape", q, g.ints(-1, H, hd)), perm=[1, 0, 2])    # (H, T, hd)
        k = g.op("Transpose", g.op("Reshape", k, g.ints(-1, KV, hd)), perm=[1, 0, 2])   # (KV, T, hd)
        v = g.op("Transpose", g.op("Reshape", v, g.ints(-1, KV, hd)), perm=[1, 0, 2])
        q, k = rope(g, q, cos, sin, hd // 2), rope(g, k, cos, sin, hd // 2)
        # Grouped queries: query head j reads key/value head j // (H / KV) (llmlab's repeat_kv).
        def repeat(t):
            wide = g.op("Expand", g.op("Unsqueeze", t, g.ints(1)), g.ints(KV, H // KV, 1, 1))  # (KV, H/KV, T, hd)
            return g.op("Reshape", wide, g.ints(H, -1, hd))                                    # (H, T, hd)
        k, v = repeat(k), repeat(v)
        scores = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 2, 1])), g.scalar(hd ** -0.5))
        weights = g.op("Softmax", g.op("Add", scores, mask), axis=-1)                  # (H, T, T)
        patterns.append(g.op("Unsqueeze", weights, g.ints(0)))                         # (1, H, T, T)
        z = g.op("Reshape", g.op("Transpose", g.op("MatMul", weights, v), perm=[1, 0, 2]), g.ints(-1, H * hd))
        x = g.op("Add", x, linear(f"blk.{i}.attn_output.weight", z))                   # (T, D)
        h = rms_norm(g, x, norm_weight(f"blk.{i}.ffn_norm.weight"), c.norm_eps)
        gate, up = linear(f"blk.{i}.ffn_gate.weight", h), linear(f"blk.{i}.ffn_up.weight", h)  # (T, d_ff)
        act = g.op("Mul", g.op("Mul", gate, g.op("Sigmoid", gate)), up)               # SwiGLU
        x = g.op("Add", x, linear(f"blk.{i}.ffn_down.weight", act))                    # (T, D)
        lens_rows.append(g.op("Gather", x, last, axis=0))

    g.op("Concat", *patterns, axis=0, outputs=["attention"])                           # (L, H, T, T)
    # The logit lens and the model's output are one readout: final norm, then the tied LM head.
    resid = g.op("Concat", *lens_rows, axis=0)                                         # (L+1, D)
    normed = rms_norm(g, resid, norm_weight("output_norm.weight"), c.norm_eps)
    V, nb = emb_u.shape[0], emb_u.shape[1]
    scales = g.op("Reshape", g.op("Cast", emb_d_name, to=1), g.ints(V * nb))
    all_logits = g.op("MatMulNBits", normed, emb_u_name, scales, domain="com.microsoft",
                      K=D, N=V, bits=8, block_size=32)                                 # (L+1, V): (u - 128) d
    all_probs = g.op("Softmax", all_logits, axis=-1)
    g.op("TopK", all_probs, g.ints(LENS_K), axis=-1, outputs=["lens_probs", "lens_ids"])
    final = g.const("final_row", np.array(c.n_layers, dtype=np.int64))                # a scalar index
    g.op("Gather", all_logits, final, axis=0, outputs=["logits"])                      # (V,)
    g.op("Gather", all_probs, final, axis=0, outputs=["probs"])

    V, L = c.vocab_size, c.n_layers
    outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, [V]),
        helper.make_tensor_value_info("probs", TensorProto.FLOAT, [V]),
        helper.make_tensor_value_info("attention", TensorProto.FLOAT, [L, H, "T", "T"]),
        helper.make_tensor_value_info("lens_ids", TensorProto.INT64, [L + 1, LENS_K]),
        helper.make_tensor_value_info("lens_probs", TensorProto.FLOAT, [L + 1, LENS_K]),
    ]
    graph = helper.make_graph(g.nodes, "smollm2_135m_live",
                              [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["T"])],
                              outputs, g.initializers)
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


def run_onnx(path: str | os.PathLike, ids, session=None) -> dict:
    """Run the exported graph with onnxruntime on one prompt's ids; returns {output name: array}."""
    import onnxruntime

    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    if not 1 <= ids.size <= MAX_TOKENS:
        raise ValueError(f"The live model takes 1 to {MAX_TOKENS} tokens; got {ids.size}. Shorten the prompt.")
    if session is None:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        session = onnxruntime.InferenceSession(os.fspath(path), options, providers=["CPUExecutionProvider"])
    return dict(zip(LIVE_OUTPUTS, session.run(list(LIVE_OUTPUTS), {"input_ids": ids})))
