"""SmolLM2-135M as an ONNX graph that keeps the GGUF file's own quantized numbers.

The graph is written node by node from llmlab's ModelConfig, one block at a time, in the same
order as ``llmlab.block`` (RMSNorm, attention with RoPE and grouped queries, RMSNorm, SwiGLU).

How the weights stay small *and* exact: the site ships the GGUF's own quantized blocks, and the page expands
them to float32 with the same arithmetic as llmlab's loader (gguf.quants); the graph then multiplies by
ordinary float32 matrices (MatMul, by w^T stored as it is read). The graph names each weight as an external
float32 tensor of one file, weights.f32, that the site does not ship: `model.expand.json` says which
quantized blocks make which bytes of it. The page's worker expands one weight at a time, when onnxruntime
reads that byte range, into one reused buffer (`expand_weights` here writes the whole file, for onnxruntime
in Python). (onnxruntime-web's 4-bit ``MatMulNBits`` re-expands them on every call on WebAssembly.)

- Q4_1 linears (every W_q, W_k, W_v, W_o and FFN matrix): blocks of 20 bytes per 32 weights, a scale d and
  a minimum m (float16), 16 bytes of 4-bit q (element j in byte j's low nibble, j + 16 in its high): w = d*q + m.
- The Q8_0 token embedding (tied to the LM head): 34-byte blocks, d (float16) and 32 int8 q: w = d * q. The
  float32 table serves the embedding (Gather) and the LM head (MatMul), in 16 slices (7 MB each, not 113).
- llama.cpp's permuted rows of W_q and W_k are put back (``llmlab.gguf.unpermute_qk``).

    path = export_onnx("/tmp/live")                  # model.onnx, model.data.0, ..., model.expand.json, weights.f32
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

import json
import os
from pathlib import Path

import numpy as np

from llmlab.gguf import open_reader
from llmlab.live.blocks import (BLOCK_BYTES, Q4_1_BLOCK, Q8_0_BLOCK, expand_blocks, raw_blocks, smollm2_config,
                                smollm2_gguf_path, unpermute_rows)
from llmlab.positions import rope_cos_sin

CONTEXT = 1024            # longest text (prompt + written tokens) the live model's cache holds
MAX_TOKENS = 256          # longest prompt a view reads whole (attention weights grow as T^2)
LENS_K = 5                # top tokens per layer in the logit lens
EMBEDDING_CHUNKS = 16     # slices of the (tied) embedding table, each expanded on its own (7 MB, not 113)
CHUNK_BYTES = 40 << 20    # weight files of at most 40 MiB (43 MiB once written as script files)
LIVE_INPUTS = ("input_ids", "past_keys", "past_values", "head_mask", "steer", "attention_rows",
               "readout_rows", "lens_target")
LIVE_OUTPUTS = ("logits", "resid", "present_keys", "present_values", "attention", "lens_ids", "lens_probs",
                "lens_target_probs", "lens_target_ranks")
WEIGHTS_FILE = "weights.f32"      # the expanded weights: written by the page in memory, never shipped
KERNEL_FILE = "model.norms"       # the decode kernel's float32 norms and RoPE tables (decode.c)


# ------------------------------------------------------------------ a small graph writer

class Graph:
    """Collects nodes and initializers with unique names; `op` returns the output name(s)."""

    def __init__(self):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes, self.initializers, self.count, self.weights, self.norms = [], [], 0, [], []

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

    def weight(self, hint: str, kind: str, blocks: np.ndarray, source: str) -> str:
        """A float32 (K, N) initializer, w^T for the quantized blocks (N, nb, bytes) of w, expanded when the
        model loads (transposed: onnxruntime multiplies one row by a (K, N) matrix without repacking it)."""
        from onnx import TensorProto

        name = self.name(hint)
        N, K = blocks.shape[0], blocks.shape[1] * 32
        tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[K, N], data_location=TensorProto.EXTERNAL)
        offset = sum(w["rows"] * w["cols"] * 4 for w in self.weights)
        for key, value in (("location", WEIGHTS_FILE), ("offset", str(offset)), ("length", str(N * K * 4))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        self.initializers.append(tensor)
        self.weights.append(dict(name=name, tensor=source, kind=kind, rows=N, cols=K, offset=offset, blocks=blocks))
        return name

    def ints(self, *values: int) -> str:
        return self.const("shape", np.array(values, dtype=np.int64))

    def scalar(self, value: float) -> str:
        return self.const("c", np.array(value, dtype=np.float32))


def rms_norm(g: Graph, x: str, weight: np.ndarray, eps: float) -> str:
    """x / sqrt(mean(x^2) + eps) * w over the last axis (llmlab.norms.rms_norm), as onnxruntime's one
    SimplifiedLayerNormalization node (written out, it took seven nodes, and each node costs a call)."""
    return g.op("SimplifiedLayerNormalization", x, g.const("norm_w", weight.astype(np.float32)),
                axis=-1, epsilon=float(eps))


def rope(g: Graph, x: str, start: str, cos: str, sin: str, heads: int) -> str:
    """x * cos + rotate_half(x) * sin for x (T, heads * hd) at positions start, start + 1, ...:
    rotate_half(x) = (-x2, x1) within each head, as onnxruntime's RotaryEmbedding (not interleaved)
    computes it from the half tables cos, sin (CONTEXT, hd / 2). Returns (1, T, heads * hd)."""
    return g.op("RotaryEmbedding", g.op("Unsqueeze", x, g.ints(0)), start, cos, sin, domain="com.microsoft",
                num_heads=heads, interleaved=0)


def pick_column(g: Graph, parts: list, slices: list, ids: str) -> str:
    """Column ids of the matrix split by columns into parts (slices: (first column, width) of each),
    e.g. a token's embedding from the vocabulary's slices: each part gathers at the id's offset in its
    slice (clamped into it) and Where keeps the part that holds the id, so no number is touched."""
    per = slices[0][1]
    width = g.const("slice_width", np.array(per, np.int64))
    which = g.op("Div", ids, width)
    local = g.op("Sub", ids, g.op("Mul", which, width))
    out = None
    for k, ((_, n), part) in enumerate(zip(slices, parts)):
        at = local if n == per else g.op("Min", local, g.const("last_column", np.array(n - 1, np.int64)))
        column = g.op("Gather", part, at, axis=-1)
        out = column if out is None else g.op("Where", g.op("Equal", which, g.const("slice", np.array(k, np.int64))),
                                              column, out)
    return out


# ------------------------------------------------------------------ the model

def build_graph(reader, config) -> tuple:
    """The whole SmolLM2 forward pass with a KV cache and the live outputs (see the module docstring).

    Returns (onnx model, weights): the weights' quantized blocks and where each goes in weights.f32.
    """
    from onnx import TensorProto, helper

    c = config
    H, KV, hd, D, L = c.n_heads, c.n_kv_heads, c.head_dim, c.d_model, c.n_layers
    tensors = {t.name: t for t in reader.tensors}
    g = Graph()

    def linear(name: str, x: str, heads: int | None = None) -> str:
        blocks = raw_blocks(tensors[name], Q4_1_BLOCK)                                 # (N, K/32, 20)
        if heads is not None:  # W_q / W_k: llama.cpp's row order back to llmlab's (whole rows move)
            blocks = unpermute_rows(blocks, heads)
        return g.op("MatMul", x, g.weight("w", "q4_1", blocks, name))                  # x @ w^T, (T, N)

    def norm_weight(name: str) -> np.ndarray:
        g.norms.append(np.asarray(tensors[name].data, dtype=np.float32))         # the decode kernel's too
        return g.norms[-1]

    # The new tokens sit at positions P .. P+T-1, after the P cached ones; S = P + T keys in all.
    T = g.op("Shape", "input_ids")                                                    # [T]
    P = g.op("Slice", g.op("Shape", "past_keys"), g.ints(2), g.ints(3), g.ints(0))     # [P]
    S = g.op("Add", P, T)                                                              # [S]
    zero = g.ints(0)
    # RoPE: llmlab's own tables for CONTEXT positions, half of each (the two halves of a row share one
    # angle); the new tokens' rows start at P.
    cos, sin = rope_cos_sin(CONTEXT, hd, base=c.rope_theta)                            # (CONTEXT, hd) each
    cos_half, sin_half = cos.numpy()[:, : hd // 2].copy(), sin.numpy()[:, : hd // 2].copy()
    cos, sin = g.const("rope_cos", cos_half), g.const("rope_sin", sin_half)
    # Causal mask (T, S): key j is hidden from the new token i when j > P + i.
    keys = g.op("Range", g.op("Squeeze", zero), g.op("Squeeze", S, zero), g.op("Squeeze", g.ints(1)))
    rows = g.op("Range", g.op("Squeeze", P, zero), g.op("Squeeze", S, zero), g.op("Squeeze", g.ints(1)))
    hidden = g.op("Greater", g.op("Unsqueeze", keys, zero), g.op("Unsqueeze", rows, g.ints(1)))  # (T, S)
    mask = g.op("Where", hidden, g.scalar(float("-inf")), g.scalar(0.0))

    # Token embedding, tied to the LM head: float32 tables (D, rows) expanded from the Q8_0 blocks, in
    # EMBEDDING_CHUNKS slices of the vocabulary, so that the page never expands more than one slice at
    # once (the whole table is 113 MB).
    V = c.vocab_size
    embedding = raw_blocks(tensors["token_embd.weight"], Q8_0_BLOCK)                   # (V, D/32, 34)
    per = -(-V // EMBEDDING_CHUNKS)
    slices = [(lo, min(per, V - lo)) for lo in range(0, V, per)]
    tables = [g.weight("embedding", "q8_0", embedding[lo: lo + n], "token_embd.weight") for lo, n in slices]  # (D, n)
    x = g.op("Transpose", pick_column(g, tables, slices, "input_ids"), perm=[1, 0])    # (T, D)

    attention_end = g.op("Reshape", "attention_rows", g.ints(1))                       # [R]: 0 or T
    streams, patterns, present_k, present_v = [x], [], [], []
    for i in range(L):
        layer = g.ints(i)
        h = rms_norm(g, x, norm_weight(f"blk.{i}.attn_norm.weight"), c.norm_eps)
        q = linear(f"blk.{i}.attn_q.weight", h, heads=H)                               # (T, H*hd)
        k = linear(f"blk.{i}.attn_k.weight", h, heads=KV)                              # (T, KV*hd)
        v = linear(f"blk.{i}.attn_v.weight", h)
        q = g.op("Transpose", g.op("Reshape", rope(g, q, P, cos, sin, H), g.ints(-1, H, hd)), perm=[1, 0, 2])   # (H, T, hd)
        k = g.op("Transpose", g.op("Reshape", rope(g, k, P, cos, sin, KV), g.ints(-1, KV, hd)), perm=[1, 0, 2])  # (KV, T, hd)
        v = g.op("Transpose", g.op("Reshape", v, g.ints(-1, KV, hd)), perm=[1, 0, 2])
        # The cache: this block's past keys and values, then the new ones (what the next call gets back).
        k = g.op("Concat", g.op("Squeeze", g.op("Gather", "past_keys", layer, axis=0), zero), k, axis=1)    # (KV, S, hd)
        v = g.op("Concat", g.op("Squeeze", g.op("Gather", "past_values", layer, axis=0), zero), v, axis=1)
        present_k.append(g.op("Unsqueeze", k, zero))
        present_v.append(g.op("Unsqueeze", v, zero))
        # Grouped queries: query head j reads key/value head j // G, G = H / KV (llmlab's repeat_kv). The
        # G query heads of one key/value head are stacked as (G T) rows of one product with its keys,
        # instead of copying each key/value head G times: (H, T, .) and (KV, G T, .) are the same numbers.
        grouped = g.op("Reshape", q, g.ints(KV, -1, hd))                                 # (KV, G T, hd)
        scores = g.op("Reshape", g.op("MatMul", grouped, g.op("Transpose", k, perm=[0, 2, 1])), g.ints(H, -1, 0))
        scores = g.op("Mul", scores, g.scalar(hd ** -0.5))                               # (H, T, S)
        weights = g.op("Softmax", g.op("Add", scores, mask), axis=-1)                  # (H, T, S)
        kept = g.op("Slice", weights, zero, attention_end, g.ints(1))                  # (H, R, S): R = 0 or T
        patterns.append(g.op("Unsqueeze", kept, zero))                                 # (1, H, R, S)
        mixed = g.op("Reshape", g.op("MatMul", g.op("Reshape", weights, g.ints(KV, -1, 0)), v), g.ints(H, -1, hd))
        # Knock-outs: head_mask[i, j] = 0 zeroes head j's output before W_o (llmlab's hook_z).
        keep = g.op("Reshape", g.op("Gather", "head_mask", layer, axis=0), g.ints(H, 1, 1))   # (H, 1, 1)
        heads_out = g.op("Mul", mixed, keep)                                           # (H, T, hd)
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
    # The readout rows: row r = layer * T + position of every stream stacked (embedding first), at
    # least one. The first is the one whose whole distribution comes back (usually the model's output
    # at the last position); every row gets its top LENS_K tokens (the logit lens).
    stacked = g.op("Concat", *streams, axis=0)                                         # ((L+1) T, D)
    normed = rms_norm(g, g.op("Gather", stacked, "readout_rows", axis=0), norm_weight("output_norm.weight"),
                      c.norm_eps)                                                      # (n, D)
    parts = [g.op("MatMul", normed, t) for t in tables]                                # the tied LM head, (n, rows) each
    # lens_target's rank: how many logits beat its own (far-off probabilities tie at 0), counted slice by
    # slice in float32 (exact below 2^24), so that no (n, V) temporary exists besides the logits and
    # their softmax; its logit comes from the slice that holds it, as the embedding's columns do.
    target_logit, better = pick_column(g, parts, slices, "lens_target"), None           # (n, 1)
    for part in parts:
        count = g.op("ReduceSum", g.op("Cast", g.op("Greater", part, target_logit), to=1), g.ints(-1), keepdims=0)
        better = count if better is None else g.op("Add", better, count)             # (n,)
    # The slices are joined only once the ranks are counted, so that they are gone before the softmax:
    # the first slice gets 0 * (a sum of the counts) added, which changes no number but makes the join
    # wait for the counts (onnxruntime frees a tensor after its last reader).
    wait = g.op("Mul", g.op("ReduceSum", better, g.ints(0), keepdims=1), g.scalar(0.0))   # (1,) = 0
    logits = g.op("Concat", g.op("Add", parts[0], wait), *parts[1:], axis=-1)          # (n, V)
    g.op("Gather", logits, g.const("first_row", np.array(0, np.int64)), axis=0, outputs=["logits"])  # (V,)
    probs = g.op("Softmax", logits, axis=-1)                                           # (n, V)
    g.op("TopK", probs, g.ints(LENS_K), axis=-1, outputs=["lens_probs", "lens_ids"])   # (n, k)
    target_p = g.op("Gather", probs, "lens_target", axis=1)                            # (n, 1)
    better = g.op("Cast", better, to=7)                                               # int64, (n,)
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
    # What the decode kernel (decode.c) reads besides the blocks: its sizes, and one float32 file of the
    # norms' weights (attn_norm, ffn_norm of each block, then output_norm) and the RoPE half tables.
    kernel = dict(file=KERNEL_FILE, n_layers=L, d_model=D, n_heads=H, n_kv_heads=KV, head_dim=hd, d_ff=c.d_ff,
                  vocab=V, context=CONTEXT, eps=float(c.norm_eps),
                  floats=np.concatenate([*g.norms, cos_half.reshape(-1), sin_half.reshape(-1)]).astype(np.float32))
    return model, g.weights, kernel


def save_files(model, weights: list, folder: Path, chunk_bytes: int = CHUNK_BYTES, expanded: bool = True,
               kernel: dict | None = None) -> list[Path]:
    """Write model.onnx, the quantized blocks in model.data.0, .1, ... (each <= chunk_bytes), the recipe
    model.expand.json, the decode kernel's model.norms (given `kernel`), and (expanded=True, for onnxruntime
    in Python) weights.f32 itself."""
    from onnx import save_model

    folder.mkdir(parents=True, exist_ok=True)
    files, recipe, handle, used = [], [], None, chunk_bytes
    for w in weights:
        data = np.ascontiguousarray(w["blocks"]).tobytes()
        if len(data) > chunk_bytes:
            raise ValueError(f"Weight {w['name']} has {len(data)} bytes, more than a chunk ({chunk_bytes}).")
        if used + len(data) > chunk_bytes:
            if handle:
                handle.close()
            files.append(folder / f"model.data.{len(files)}")
            handle, used = open(files[-1], "wb"), 0
        recipe.append(dict(name=w["name"], tensor=w["tensor"], kind=w["kind"], rows=w["rows"], cols=w["cols"],
                           offset=w["offset"],
                           file=files[-1].name, start=used, length=len(data)))
        handle.write(data)
        used += len(data)
    if handle:
        handle.close()
    total = sum(w["rows"] * w["cols"] * 4 for w in weights)
    spec = dict(file=WEIGHTS_FILE, bytes=total, weights=recipe)
    if kernel is not None:
        (folder / KERNEL_FILE).write_bytes(kernel["floats"].tobytes())
        spec["kernel"] = {key: value for key, value in kernel.items() if key != "floats"}
    (folder / "model.expand.json").write_text(json.dumps(spec))
    if expanded:
        expand_weights(folder)
    graph_path = folder / "model.onnx"
    save_model(model, os.fspath(graph_path))
    return [graph_path, folder / "model.expand.json", *files] + ([folder / KERNEL_FILE] if kernel else [])


def expand_weights(folder: str | os.PathLike) -> Path:
    """Write folder/weights.f32 from the quantized blocks and model.expand.json (what the page does in memory)."""
    folder = Path(folder)
    recipe = json.loads((folder / "model.expand.json").read_text())
    out = np.memmap(folder / recipe["file"], dtype=np.float32, mode="w+", shape=(recipe["bytes"] // 4,))
    for w in recipe["weights"]:
        with open(folder / w["file"], "rb") as f:
            f.seek(w["start"])
            blocks = np.frombuffer(f.read(w["length"]), np.uint8).reshape(w["rows"], -1, BLOCK_BYTES[w["kind"]])
        out[w["offset"] // 4: w["offset"] // 4 + w["rows"] * w["cols"]] = expand_blocks(w["kind"], blocks).T.reshape(-1)
    out.flush()
    del out
    return folder / recipe["file"]


def export_onnx(folder: str | os.PathLike, gguf_path: str | os.PathLike | None = None, expanded: bool = True) -> Path:
    """Write SmolLM2-135M's live graph and weights into `folder`; returns the .onnx file's path.

    expanded=False leaves out weights.f32 (the site's files: the page expands the blocks itself).
    """
    reader = open_reader(gguf_path or smollm2_gguf_path())
    config = smollm2_config(reader)
    if config.family != "llama" or config.norm != "rms" or config.ffn != "swiglu" or not config.tie_embeddings:
        raise ValueError(f"export_onnx writes SmolLM2-style models (llama family, RMSNorm, SwiGLU, tied "
                         f"embeddings); this file's config is family={config.family!r}, norm={config.norm!r}, "
                         f"ffn={config.ffn!r}, tie_embeddings={config.tie_embeddings}.")
    model, weights, kernel = build_graph(reader, config)
    return save_files(model, weights, Path(folder), expanded=expanded, kernel=kernel)[0]


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
