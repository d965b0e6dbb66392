"""Every automatically checked coding exercise: its id, chapter, title, the function the learner
writes, and the check that grades it. A chapter's exercise cell ends with `check("<id>", <function>)`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from llmlab.exercises import (checks_attention as attn, checks_blocks as blocks, checks_generation as gen,
                              checks_inspection as lens, checks_interp as interp, checks_positions as pos,
                              checks_tokens as tok,
                              checks_quant as quant, checks_training as train, checks_tuned_lens as tuned)


@dataclass(frozen=True)
class Exercise:
    id: str            # what learners pass to check(), e.g. "softmax"
    chapter: int | str  # the chapter whose exercise it is: 5, or "10b" for the page after chapter 10
    title: str         # one line for the exercise list
    signature: str     # the function the learner writes
    check: Callable    # check(learner) -> success note; raises Mistake / NotAttempted
    points: float = 1  # what it is worth in `llmlab grade`'s gradebook (an assignment may set its own)


EXERCISES = [
    Exercise("greedy_next_token", 1, "Read the next token off the last position", "greedy_next_token(logits)", gen.check_greedy_next_token),
    Exercise("bpe_pair_counts", 2, "Count adjacent token pairs", "bpe_pair_counts(ids)", tok.check_bpe_pair_counts),
    Exercise("bpe_merge", 2, "Apply one BPE merge", "bpe_merge(ids, pair, new_id)", tok.check_bpe_merge),
    Exercise("bpe_encode", 2, "Encode with learned merges, earliest merge first", "bpe_encode(ids, merges)", tok.check_bpe_encode),
    Exercise("one_hot_embedding", 3, "Embedding lookup as one-hot times a matrix", "one_hot_embedding(ids, table)", tok.check_one_hot_embedding),
    Exercise("cosine_similarity", 3, "All-pairs cosine similarity", "cosine_similarity(a, b)", tok.check_cosine_similarity),
    Exercise("sinusoidal", 4, "The sinusoidal position table", "sinusoidal(T, d)", pos.check_sinusoidal),
    Exercise("rope", 4, "Rotary position embedding (split halves)", "rope(x, base=10000.0)", pos.check_rope),
    Exercise("softmax", 5, "A softmax that never overflows", "softmax(x, dim=-1)", attn.check_softmax),
    Exercise("causal_mask", 5, "The causal mask", "causal_mask(T)", attn.check_causal_mask),
    Exercise("sdpa", 5, "Scaled dot-product attention", "attention(q, k, v, mask=None)", attn.check_sdpa),
    Exercise("gqa_repeat_kv", 5, "Share KV heads across query heads (GQA)", "repeat_kv(x, n_rep)", attn.check_gqa_repeat_kv),
    Exercise("gqa_attention", 5, "A GQA attention layer that runs SmolLM2's weights", "gqa_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, cos, sin)", attn.check_gqa_attention),
    Exercise("swiglu", 6, "The SwiGLU feed-forward network", "swiglu(x, w_gate, w_up, w_down)", blocks.check_swiglu),
    Exercise("rms_norm", 7, "RMSNorm", "rms_norm(x, weight, eps=1e-6)", blocks.check_rms_norm),
    Exercise("layer_norm", 7, "LayerNorm", "layer_norm(x, weight, bias, eps=1e-5)", blocks.check_layer_norm),
    Exercise("prenorm_block", 8, "A pre-norm residual block", "prenorm_block(x, attn, mlp, norm1, norm2)", blocks.check_prenorm_block),
    Exercise("llama_block", 8, "A whole Llama block from raw weights", "llama_block(x, w, n_heads, n_kv_heads, cos, sin, eps)", blocks.check_llama_block),
    Exercise("temperature", 9, "Temperature: the probabilities softmax(logits / t)", "temperature(logits, t) -> probabilities", gen.check_temperature),
    Exercise("top_k", 9, "Top-k filtering", "top_k(logits, k)", gen.check_top_k),
    Exercise("top_p", 9, "Top-p (nucleus) filtering", "top_p(logits, p)", gen.check_top_p),
    Exercise("kv_decode_step", 10, "One decode step with a KV cache", "kv_decode_step(q, k_new, v_new, k_cache, v_cache)", gen.check_kv_decode_step),
    Exercise("kv_cache_bytes", 10, "How big is the KV cache?", "kv_cache_bytes(n_layers, n_heads, n_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_value=2)", gen.check_kv_cache_bytes),
    Exercise("dequantize_q4_1", "10b", "Decode one GGUF Q4_1 block from its 20 bytes", "dequantize_q4_1(block)", quant.check_dequantize_q4_1),
    Exercise("quantize_int8_rows", "10b", "int8 with one scale per row", "quantize_int8_rows(w)", quant.check_quantize_int8_rows),
    Exercise("online_softmax", 11, "Online softmax, block by block", "online_softmax(x, block_size)", attn.check_online_softmax),
    Exercise("sliding_window_mask", 11, "The sliding-window mask", "sliding_window_mask(T, window)", attn.check_sliding_window_mask),
    Exercise("cross_entropy_shifted", 12, "The next-token loss", "cross_entropy_shifted(logits, ids)", train.check_cross_entropy_shifted),
    Exercise("stable_cross_entropy", 12, "A cross-entropy that large logits cannot break", "stable_cross_entropy(logits, targets)", train.check_stable_cross_entropy),
    Exercise("cosine_schedule", 12, "Warm-up, then cosine decay", "cosine_schedule(it, max_lr, min_lr, warmup, cycle)", train.check_cosine_schedule),
    Exercise("induction_score", 12, "Find induction heads: the score on repeated random tokens", "induction_score(pattern, length)", interp.check_induction_score),
    Exercise("cross_attention", 13, "Cross-attention", "cross_attention(x, memory, w_q, w_k, w_v)", attn.check_cross_attention),
    Exercise("linear_cka", 14, "Linear CKA between two representations", "linear_cka(x, y)", lens.check_linear_cka),
    Exercise("logit_lens", 15, "The logit lens", "logit_lens(resid, final_norm, unembed)", lens.check_logit_lens),
    Exercise("restore_one", 15, "Causal tracing: noise the subject, restore one state", "restore_one(model, ids, subject, layer, position, answer, noise)", interp.check_restore_one),
    Exercise("logit_shares", 15, "Direct logit attribution with the final norm's scale frozen", "logit_shares(parts, norm_weight, eps, unembed_row)", interp.check_logit_shares),
    Exercise("tuned_lens", 15, "A tuned lens fitted in closed form (ridge regression per block)", "tuned_lens(stream, train, layer, norm_weight, eps, unembed, ridge)", tuned.check_tuned_lens),
    Exercise("patch_head", 16, "Activation patching of one attention head", "patch_head(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong)", interp.check_patch_head),
    Exercise("steering_vector", 16, "A steering vector", "steering_vector(acts_pos, acts_neg)", lens.check_steering_vector),
]

BY_ID = {ex.id: ex for ex in EXERCISES}


def list_exercises(chapter: int | str | None = None) -> list[Exercise]:
    """All exercises, or those of one chapter (5, or "10b")."""
    return [ex for ex in EXERCISES if chapter is None or str(ex.chapter) == str(chapter)]
