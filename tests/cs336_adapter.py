r"""Stanford CS336 (spring 2025) assignment 1's adapter functions, answered by llmlab.

CS336's public tests call a fixed set of functions (``run_linear``, ``run_rope``, ``run_train_bpe``,
``get_tokenizer``, ...) from their ``tests/adapters.py``. This module implements the same names and
signatures, each a few lines that call llmlab, so their suite checks llmlab against their reference
numbers. Nothing here comes from their repository.

Two conventions differ between the assignment and llmlab, and the adapter converts them:

- RoPE. CS336 rotates neighbouring channel pairs (x0, x1), (x2, x3), ...; llmlab rotates split halves
  (x0, x_{d/2}), (x1, x_{d/2+1}), ... with the same angle per pair. The rows of W_q and W_k are reordered
  with ``llmlab.gguf.unpermute_qk`` (the same reordering llama.cpp's files need), which leaves every q.k
  score unchanged; ``run_rope`` reorders the channels before and after.
- Names. CS336's state dict (``layers.0.attn.output_proj.weight``, ``ffn.w1`` the gate, ``ffn.w3`` the up
  projection, ``ln1``/``ln2``) is mapped to llmlab's (``blocks.0.attn.o_proj.weight``, ...), strictly:
  every tensor must be used and every llmlab parameter filled.

How to run their suite against this module (from the root of this repository; their tests and
fixtures stay outside it, and their test-only packages outside llmlab's venv):

    LLMLAB=$PWD CS336=/tmp/cs336
    git clone https://github.com/stanford-cs336/assignment1-basics "$CS336" && cd "$CS336"
    printf 'import sys\nsys.path.insert(0, "%s/tests")\nfrom cs336_adapter import *  # noqa: F403\n' \
        "$LLMLAB" > tests/adapters.py          # their adapters.py becomes an import of this module
    "$LLMLAB/.venv/bin/python" -m pip install --no-deps --target site einops jaxtyping wadler-lindig tiktoken
    mkdir -p tiktoken_cache && "$LLMLAB/.venv/bin/python" -c "import hashlib, shutil; \
        url = 'https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/'; \
        key = lambda name: 'tiktoken_cache/' + hashlib.sha1((url + name).encode()).hexdigest(); \
        open(key('vocab.bpe'), 'wb').write(b'#version: 0.2\n' + open('tests/fixtures/gpt2_merges.txt', 'rb').read()); \
        shutil.copy('tests/fixtures/gpt2_vocab.json', key('encoder.json'))"
    TIKTOKEN_CACHE_DIR=$PWD/tiktoken_cache PYTHONPATH=$PWD/site "$LLMLAB/.venv/bin/python" -m pytest tests -rA

The tiktoken_cache step lets ``tiktoken.get_encoding("gpt2")``, their reference tokenizer, work offline:
it would download GPT-2's vocab.bpe and encoder.json, which are their fixtures gpt2_merges.txt (after
the line "#version: 0.2") and gpt2_vocab.json byte for byte; tiktoken checks both files' SHA-256.

tests/test_cs336_adapter.py checks these functions on small inputs against torch, offline.
"""
from __future__ import annotations

import os

import torch

from llmlab.attention import Attention, causal_mask, scaled_dot_product_attention, softmax
from llmlab.block import Block
from llmlab.config import ModelConfig
from llmlab.convert import build_model
from llmlab.embedding import embed_tokens
from llmlab.ffn import GatedFeedForward, silu
from llmlab.gguf import unpermute_qk
from llmlab.norms import rms_norm
from llmlab.positions import RotaryEmbedding, apply_rope
from llmlab.tokenization import ByteLevelBPE, train_bpe
from llmlab.training import (AdamW, clip_grad_norm_, cosine_schedule, cross_entropy, get_batch, load_checkpoint,
                             save_checkpoint)

__all__ = ["run_linear", "run_embedding", "run_swiglu", "run_scaled_dot_product_attention",
           "run_multihead_self_attention", "run_multihead_self_attention_with_rope", "run_rope",
           "run_transformer_block", "run_transformer_lm", "run_rmsnorm", "run_silu", "run_get_batch", "run_softmax",
           "run_cross_entropy", "run_gradient_clipping", "get_adamw_cls", "run_get_lr_cosine_schedule",
           "run_save_checkpoint", "run_load_checkpoint", "get_tokenizer", "run_train_bpe"]

CS336_NORM_EPS = 1e-5   # the assignment's RMSNorm epsilon


def _config(d_model: int, num_heads: int, d_ff: int = 4, **fields) -> ModelConfig:
    """The assignment's architecture in llmlab's terms: pre-norm RMSNorm, SwiGLU, RoPE, no biases.
    (An attention layer alone does not read d_ff.)"""
    return ModelConfig(d_model=d_model, n_heads=num_heads, d_ff=d_ff, norm="rms", norm_eps=CS336_NORM_EPS,
                       block="pre", ffn="swiglu", activation="silu", positions="rope", **fields)


def _rename(weights: dict, table: dict, n_heads: int) -> dict:
    """CS336 names -> llmlab names, strictly; q and k rows go from interleaved to split-halves RoPE order."""
    left_over = sorted(set(weights) - set(table))
    missing = sorted(set(table) - set(weights))
    if left_over or missing:
        raise KeyError(f"CS336 weights do not match llmlab's layout: unused {left_over[:5]}, missing {missing[:5]}.")
    out = {}
    for theirs, ours in table.items():
        w = weights[theirs]
        if theirs.endswith(("attn.q_proj.weight", "attn.k_proj.weight")):
            w = unpermute_qk(w, n_heads)   # the same q.k scores under llmlab's rotate_half RoPE
        out[ours] = w
    return out


_ATTENTION_NAMES = {"q_proj.weight": "q_proj.weight", "k_proj.weight": "k_proj.weight",
                    "v_proj.weight": "v_proj.weight", "output_proj.weight": "o_proj.weight"}
_BLOCK_NAMES = {**{"attn." + k: "attn." + v for k, v in _ATTENTION_NAMES.items()},
                "ln1.weight": "attn_norm.weight", "ln2.weight": "mlp_norm.weight",
                "ffn.w1.weight": "mlp.gate_proj.weight",   # SwiGLU: w2(silu(w1 x) * w3 x)
                "ffn.w3.weight": "mlp.up_proj.weight", "ffn.w2.weight": "mlp.down_proj.weight"}


def _interleaved_to_halves(d: int) -> torch.Tensor:
    """[0, 2, ..., d-2, 1, 3, ..., d-1]: the channel order that makes pairs (0, 1), (2, 3), ... into
    pairs (0, d/2), (1, d/2 + 1), ..."""
    return torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])


def _rope_tables(head_dim: int, theta: float, T: int, positions, like: torch.Tensor):
    """llmlab's cos/sin: (T, head_dim) for positions (T,) or None (0..T-1), (N, 1, T, head_dim) for (N, T)."""
    return RotaryEmbedding(head_dim, theta)(0, T, like.device, like.dtype, positions)


# ---------------------------------------------------------------- model pieces

def run_linear(d_in: int, d_out: int, weights: torch.Tensor, in_features: torch.Tensor) -> torch.Tensor:
    """y = x W^T. llmlab's projections are torch.nn.Linear (no bias), as in Attention.q_proj."""
    layer = torch.nn.Linear(d_in, d_out, bias=False)
    layer.load_state_dict({"weight": weights})
    return layer(in_features)


def run_embedding(vocab_size: int, d_model: int, weights: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    return embed_tokens(token_ids, weights)


def run_swiglu(d_model: int, d_ff: int, w1_weight, w2_weight, w3_weight, in_features: torch.Tensor) -> torch.Tensor:
    ffn = GatedFeedForward(_config(d_model, 1, d_ff))
    ffn.load_state_dict({"gate_proj.weight": w1_weight, "up_proj.weight": w3_weight, "down_proj.weight": w2_weight})
    return ffn(in_features)


def run_scaled_dot_product_attention(Q, K, V, mask=None) -> torch.Tensor:
    """mask: True where a query may attend to a key (the convention of both)."""
    out, _weights = scaled_dot_product_attention(Q, K, V, mask)
    return out


def _attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features,
               rope=None) -> torch.Tensor:
    """Causal multi-head self-attention over in_features (..., T, d_model), with llmlab's Attention."""
    attn = Attention(_config(d_model, num_heads))
    theirs = {"q_proj.weight": q_proj_weight, "k_proj.weight": k_proj_weight, "v_proj.weight": v_proj_weight,
              "output_proj.weight": o_proj_weight}
    # q and k rows reordered alike within each head: without RoPE every q.k score is unchanged anyway
    renamed = _rename({"attn." + k: v for k, v in theirs.items()},
                      {"attn." + k: "attn." + v for k, v in _ATTENTION_NAMES.items()}, num_heads)
    attn.load_state_dict({k.removeprefix("attn."): v for k, v in renamed.items()})
    *lead, T, d = in_features.shape
    x = in_features.reshape(-1, T, d)                                   # (B, T, d)
    out = attn(x, rope, causal_mask(T, x.device))                       # (B, T, d)
    return out.reshape(*lead, T, d)


def run_multihead_self_attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                                 in_features) -> torch.Tensor:
    return _attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features)


def run_multihead_self_attention_with_rope(d_model, num_heads, max_seq_len, theta, q_proj_weight, k_proj_weight,
                                           v_proj_weight, o_proj_weight, in_features,
                                           token_positions=None) -> torch.Tensor:
    T = in_features.shape[-2]
    if token_positions is not None:   # (..., T), broadcast against in_features' leading dims -> (B, T)
        token_positions = token_positions.expand(in_features.shape[:-1]).reshape(-1, T)
    rope = _rope_tables(d_model // num_heads, theta, T, token_positions, in_features)
    return _attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features,
                      rope)


def run_rope(d_k: int, theta: float, max_seq_len: int, in_query_or_key: torch.Tensor,
             token_positions: torch.Tensor) -> torch.Tensor:
    """CS336's interleaved RoPE = llmlab's split-halves RoPE on reordered channels, ordered back."""
    order = _interleaved_to_halves(d_k).to(in_query_or_key.device)
    T = in_query_or_key.shape[-2]
    positions = token_positions.reshape(-1, T) if token_positions.dim() > 1 else token_positions
    cos, sin = _rope_tables(d_k, theta, T, positions, in_query_or_key)
    # (..., T, d_k) in the shape of the positions, which broadcast against the input's leading dims
    cos, sin = cos.reshape(*token_positions.shape, d_k), sin.reshape(*token_positions.shape, d_k)
    rotated = apply_rope(in_query_or_key[..., order], cos, sin)         # (..., T, d_k), split-halves order
    return rotated[..., torch.argsort(order)]                          # back to the interleaved order


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights: dict,
                          in_features: torch.Tensor) -> torch.Tensor:
    block = Block(_config(d_model, num_heads, d_ff))
    block.load_state_dict(_rename(weights, _BLOCK_NAMES, num_heads))
    T = in_features.shape[-2]
    rope = _rope_tables(d_model // num_heads, theta, T, None, in_features)
    return block(in_features, rope, causal_mask(T, in_features.device))


def run_transformer_lm(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights: dict,
                       in_indices: torch.Tensor) -> torch.Tensor:
    config = _config(d_model, num_heads, d_ff, vocab_size=vocab_size, n_layers=num_layers,
                     max_seq_len=context_length, rope_theta=rope_theta, tie_embeddings=False)
    table = {"token_embeddings.weight": "tok_embed.weight", "ln_final.weight": "final_norm.weight",
             "lm_head.weight": "lm_head.weight"}
    for i in range(num_layers):
        table.update({f"layers.{i}.{k}": f"blocks.{i}.{v}" for k, v in _BLOCK_NAMES.items()})
    model = build_model(config, _rename(weights, table, num_heads))
    return model(in_indices)


def run_rmsnorm(d_model: int, eps: float, weights: torch.Tensor, in_features: torch.Tensor) -> torch.Tensor:
    return rms_norm(in_features, weights, eps)


def run_silu(in_features: torch.Tensor) -> torch.Tensor:
    return silu(in_features)


def run_softmax(in_features: torch.Tensor, dim: int) -> torch.Tensor:
    return softmax(in_features, dim)


# ---------------------------------------------------------------- training

def run_get_batch(dataset, batch_size: int, context_length: int, device: str):
    return get_batch(dataset, batch_size, context_length, device)


def run_cross_entropy(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return cross_entropy(inputs, targets)


def run_gradient_clipping(parameters, max_l2_norm: float) -> None:
    clip_grad_norm_(parameters, max_l2_norm)


def get_adamw_cls() -> type[torch.optim.Optimizer]:
    return AdamW


def run_get_lr_cosine_schedule(it: int, max_learning_rate: float, min_learning_rate: float, warmup_iters: int,
                               cosine_cycle_iters: int) -> float:
    return cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters)


def run_save_checkpoint(model, optimizer, iteration: int, out) -> None:
    save_checkpoint(model, optimizer, iteration, out)


def run_load_checkpoint(src, model, optimizer) -> int:
    return load_checkpoint(src, model, optimizer)


# ---------------------------------------------------------------- tokenizer

def get_tokenizer(vocab: dict, merges: list, special_tokens: list | None = None) -> ByteLevelBPE:
    """vocab {id: bytes} with ids 0..n-1, merges [(bytes, bytes), ...] -> llmlab's ByteLevelBPE with GPT-2's
    pre-split regex (the assignment's). Special tokens missing from vocab get the next ids."""
    if sorted(vocab) != list(range(len(vocab))):
        raise ValueError("vocab ids must be 0 .. len(vocab) - 1 (llmlab stores the vocabulary as a list).")
    token_bytes = [vocab[i] for i in range(len(vocab))]
    special = {}
    for text in special_tokens or []:
        data = text.encode("utf-8")
        if data not in token_bytes:
            token_bytes.append(data)
        special[text] = token_bytes.index(data)
    id_of = {b: i for i, b in enumerate(token_bytes) if i not in special.values()}
    pairs = [(id_of[a], id_of[b]) for a, b in merges]
    return ByteLevelBPE(token_bytes, pairs, "gpt2", special)


def run_train_bpe(input_path: str | os.PathLike, vocab_size: int, special_tokens: list, **kwargs):
    """GPT-2's pre-split, special tokens cut out of the text, ties to the greatest pair of bytes (the
    assignment's rules) -> ({id: bytes}, [(bytes, bytes), ...] in the order learned)."""
    if kwargs:
        raise NotImplementedError(f"llmlab's train_bpe has no counterpart for {sorted(kwargs)}.")
    with open(input_path, encoding="utf-8") as f:
        text = f.read()
    tok = train_bpe(text, vocab_size, pattern="gpt2", special_tokens=special_tokens, tie_break="greatest_bytes")
    vocab = dict(enumerate(tok.token_bytes))
    merges = [(tok.token_bytes[a], tok.token_bytes[b]) for a, b in tok.merges]
    return vocab, merges
