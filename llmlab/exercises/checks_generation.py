"""Checks for the exercises on turning logits into tokens and on inference: the next-token argmax
(ch. 1), temperature, top-k and top-p (ch. 9), a KV-cache decode step and the cache size (ch. 10)."""
from __future__ import annotations

import torch

from llmlab.exercises.compare import expect_equal, expect_tensor, maybe
from llmlab.exercises.core import Learner, generator
from llmlab.exercises.results import Mistake
from llmlab.exercises.messages import say


def check_greedy_next_token(fn: Learner) -> str:
    """greedy_next_token(logits) -> LongTensor (B,): the most likely next token for each sequence,
    read from the LAST position of logits (B, T, V)."""
    g = generator(37)
    for B, T, V in [(1, 4, 10), (3, 5, 12)]:
        logits = torch.randn(B, T, V, generator=g) * 3
        got = fn(logits, names=("logits",))
        expect_tensor(fn, got, logits[:, -1].argmax(-1), mistakes=[
            (say("you read the FIRST position. The prediction for the next token is at the last position, "
             "logits[:, -1], the only one that has seen the whole prompt."), logits[:, 0].argmax(-1)),
            (say("you returned a prediction for every position; only the last position predicts the next token "
             "(logits[:, -1])."), logits.argmax(-1)),
            (say("argmin picks the LEAST likely token; use argmax."), logits[:, -1].argmin(-1)),
        ])
    return say("picks the argmax of the last position's logits for every sequence in the batch.")


def check_temperature(fn: Learner) -> str:
    """temperature(logits, t) -> probabilities softmax(logits / t) over the last dim (t > 0)."""
    g = generator(41)
    cases = [(torch.tensor([2.0, 1.0, 0.0]), 0.5), (torch.randn(2, 6, generator=g) * 2, 2.0),
             (torch.randn(3, 5, generator=g), 1.0), (torch.tensor([500.0, 498.0, 490.0]), 0.7)]
    for logits, t in cases:
        got = fn(logits, t, names=("logits", "t"))
        probs = torch.softmax(logits, -1)
        sharpened = probs ** (1 / t)
        expect_tensor(fn, got, torch.softmax(logits / t, -1), atol=1e-5, nonfinite_hint=(
            say("exp() overflowed on large logits: subtract the max before exp (or use torch.softmax).")), mistakes=[
            (say("you multiplied by the temperature; divide the logits by it: a high temperature must flatten "
             "the distribution."), torch.softmax(logits * t, -1)),
            (say("the temperature goes on the logits BEFORE the softmax: softmax(logits / t). Dividing "
             "probabilities by t does not give a distribution (it no longer sums to 1)."), probs / t),
            (say("p ** (1/t) is proportional to the right answer but does not sum to 1: renormalise, or better, "
             "compute softmax(logits / t)."), sharpened),
            (say("you returned the scaled logits; the exercise asks for probabilities: softmax(logits / t)."), logits / t),
            (say("the temperature was ignored: this is softmax(logits)."), probs),
        ])
    return say("softmax(logits / t) for t = 0.5, 0.7, 1 and 2, including large logits.")


def check_top_k(fn: Learner) -> str:
    """top_k(logits, k) -> the logits with everything outside the k largest set to -inf (last dim)."""
    from llmlab.sampling import top_k_filter as reference

    g = generator(43)
    cases = [(torch.tensor([1.0, 3.0, 2.0, 0.5, 2.5]), 2), (torch.randn(3, 8, generator=g), 3),
             (torch.randn(2, 6, generator=g), 1), (torch.randn(1, 4, generator=g), 4)]
    for logits, k in cases:
        got = fn(logits, k, names=("logits", "k"))
        expect_tensor(fn, got, reference(logits, k), mistakes=[
            (say("one token too many: keep exactly k = {a} tokens (those >= the k-th largest value).", a=k),
             _keep_top(logits, k + 1)),
            (say("one token too few: keep exactly k = {a} tokens; the k-th largest value itself stays (compare "
                 "with >=, not >).", a=k), _keep_top(logits, k - 1)),
            (say("removed tokens must be set to -inf, not 0: softmax turns a 0 logit into e^0 = 1, a real "
             "probability, so the 'removed' tokens could still be sampled."),
             torch.where(_keep_top(logits, k) == float("-inf"), torch.zeros_like(logits), logits)),
            (say("you kept the k SMALLEST logits; keep the k largest (topk(..., largest=True), the default)."),
             _keep_bottom(logits, k)),
        ])
    return say("keeps exactly the k largest logits (k = 1 .. 4, batched too) and sets the rest to -inf.")


def _keep_top(logits, k):
    if k <= 0:
        return torch.full_like(logits, float("-inf"))
    k = min(k, logits.shape[-1])
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def _keep_bottom(logits, k):
    kth = logits.topk(k, dim=-1, largest=False).values[..., -1:]
    return logits.masked_fill(logits > kth, float("-inf"))


def _top_p_variant(logits, p, rule):
    """Keep tokens by their place in the sorted cumulative probability; `rule` picks the variant."""
    probs = torch.softmax(logits, -1)
    sorted_probs, order = probs.sort(-1, descending=True)
    cum = sorted_probs.cumsum(-1)                          # inclusive
    if rule == "right":
        keep_sorted = (cum - sorted_probs) < p             # everything until the cumulative sum reaches p
    elif rule == "one_too_few":
        keep_sorted = cum <= p                             # drops the token that crosses p
    elif rule == "one_too_many":
        keep_sorted = (cum - sorted_probs) <= p
    else:  # "ascending": cumulative sum from the least likely token
        asc_probs, order = probs.sort(-1)
        keep_sorted = asc_probs.cumsum(-1) > 1 - p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def check_top_p(fn: Learner) -> str:
    """top_p(logits, p) -> logits with -inf outside the nucleus: the smallest set of most likely tokens
    whose probabilities add up to at least p (the token that crosses p is kept)."""
    from llmlab.sampling import top_p_filter as reference

    logit = lambda probs: torch.tensor(probs).log()  # noqa: E731 - logits with known probabilities
    cases = [
        (logit([0.5, 0.3, 0.15, 0.05]), 0.7),          # keep 0.5 and 0.3 (0.5 < 0.7 <= 0.8)
        (logit([0.05, 0.3, 0.15, 0.5]), 0.9),          # unsorted input, keep 3
        (logit([0.6, 0.25, 0.1, 0.05]), 0.4),          # the top token alone already passes p
        (logit([[0.1, 0.2, 0.3, 0.4], [0.35, 0.35, 0.2, 0.1]]), 0.55),
    ]
    for logits, p in cases:
        got = fn(logits, p, names=("logits", "p"))
        expected = reference(logits, p)
        if isinstance(got, torch.Tensor) and got.shape == logits.shape and torch.isinf(got).all():
            raise Mistake(say("{a} removed every token. The most likely token must always survive: keep tokens until the "
                              "cumulative probability REACHES p, including the token that crosses p (a rule like cumsum <= p "
                              "keeps one token too few and can keep none).", a=fn.last_call))
        expect_tensor(fn, got, expected, mistakes=[
            (say("one token too few: the nucleus includes the token whose probability makes the running total "
             "cross p. Remove a token only if the probabilities BEFORE it already add up to p or more "
             "(shift the cumulative sum by one, or compare cumsum - prob < p)."),
             _top_p_variant(logits, p, "one_too_few")),
            (say("one token too many: stop as soon as the total reaches p (compare the cumulative sum before the "
             "token with < p, not <= p)."), _top_p_variant(logits, p, "one_too_many")),
            (say("the cumulative sum must run from the most likely token down (sort descending); you summed "
             "from the least likely one."), _top_p_variant(logits, p, "ascending")),
            (say("nothing was removed. The cumulative sum must run over PROBABILITIES (softmax first, then sort "
             "descending and cumsum); sums of raw logits are not probabilities and never reach p."), logits),
            (say("removed tokens must be set to -inf, not 0 (a 0 logit still has probability e^0 / Z)."),
             torch.where(expected == float("-inf"), torch.zeros_like(logits), logits)),
        ])
    return say("keeps the smallest set of top tokens that reaches p, for unsorted and batched logits.")


def check_kv_decode_step(fn: Learner) -> str:
    """kv_decode_step(q, k_new, v_new, k_cache, v_cache) -> (out, k_cache, v_cache).

    q, k_new, v_new: (B, H, 1, hd) for the newest token; k_cache, v_cache: (B, H, T, hd), T may be 0.
    Append the new key and value along the time axis, then let the query attend to all T + 1 keys
    (no mask is needed: the cache holds only the past and the token itself)."""
    from llmlab.attention import scaled_dot_product_attention

    g = generator(47)
    fn.error_hints = [("Sizes of tensors must match except in dimension 3",
                       say("append along the time axis, dim 2 of (B, H, T, hd): torch.cat((k_cache, k_new), dim=2)."))]
    B, H, hd = 2, 3, 8
    k_cache, v_cache = torch.zeros(B, H, 0, hd), torch.zeros(B, H, 0, hd)
    seeded = torch.randn(B, H, 3, hd, generator=g), torch.randn(B, H, 3, hd, generator=g)
    for step in range(4):
        if step == 1:  # continue from a cache that already holds 3 tokens (a prompt after prefill)
            k_cache, v_cache = seeded
        q, k_new, v_new = (torch.randn(B, H, 1, hd, generator=g) * 2 for _ in range(3))
        got = fn(q, k_new, v_new, k_cache, v_cache, names=("q", "k_new", "v_new", "k_cache", "v_cache"))
        k_all, v_all = torch.cat((k_cache, k_new), dim=2), torch.cat((v_cache, v_new), dim=2)  # (B, H, T+1, hd)
        expected, _ = scaled_dot_product_attention(q, k_all, v_all)                            # (B, H, 1, hd)
        if not (isinstance(got, (tuple, list)) and len(got) == 3):
            raise Mistake(say("{a} returned {b}; expected a tuple of three tensors: (out, k_cache, v_cache) with the new key "
                              "and value appended to the caches.", a=fn.last_call, b=type(got).__name__))
        out, new_k, new_v = got
        expect_tensor(fn, new_k, k_all, what=say("the returned k_cache"), mistakes=[
            (say("append along the time axis (dim 2 of (B, H, T, hd)), not the last one."), maybe(lambda: torch.cat((k_cache, k_new), -1))),
            (say("the new key goes at the END of the cache (the newest position is last)."), torch.cat((k_new, k_cache), 2)),
        ])
        expect_tensor(fn, new_v, v_all, what=say("the returned v_cache"), mistakes=[
            (say("append v_new to v_cache along the time axis (dim 2)."), maybe(lambda: torch.cat((v_cache, v_new), -1))),
        ])
        mistakes = [
            (say("the scores were not scaled by 1/sqrt(head_dim) = 1/sqrt({a}).", a=hd),
             torch.softmax(q @ k_all.transpose(-2, -1), -1) @ v_all),
            (say("a causal mask built as tril on the (1, T+1) score matrix keeps only the FIRST key. A single new "
             "query may see every cached key and itself: use no mask in a decode step."), v_all[:, :, :1]),
        ]
        if k_cache.shape[2] > 0:
            mistakes.append((
                say("the query attended only to the old cache: append k_new and v_new first, so the token also "
                "attends to itself."), scaled_dot_product_attention(q, k_cache, v_cache)[0]))
        expect_tensor(fn, out, expected, what=say("the attention output"), atol=1e-5, mistakes=mistakes)
        k_cache, v_cache = k_all, v_all
    return say("four decode steps, from an empty cache and from a 3-token cache: caches and outputs are correct.")


def check_kv_cache_bytes(fn: Learner) -> str:
    """kv_cache_bytes(n_layers, n_heads, n_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_value=2)
    -> int: the memory a KV cache needs: 2 (K and V) * layers * kv heads * head_dim * tokens * batch * bytes."""
    cases = [
        (30, 9, 3, 64, 8192, 1, 2),      # SmolLM2-135M, 8K tokens, bf16
        (18, 4, 1, 256, 32768, 1, 2),    # Gemma-3-270M, 32K tokens (ignoring its sliding windows)
        (32, 32, 8, 128, 4096, 4, 4),    # a Llama-3-8B-like config, batch 4, float32
        (12, 12, 12, 64, 1024, 2, 2),    # GPT-2 small, multi-head attention
    ]
    for L, H, KV, hd, T, B, nbytes in cases:
        got = fn(L, H, KV, hd, T, B, nbytes,
                 names=("n_layers", "n_heads", "n_kv_heads", "head_dim", "seq_len", "batch_size", "bytes_per_value"))
        expected = 2 * L * KV * hd * T * B * nbytes
        expect_equal(fn, got, expected, mistakes=[
            (say("the factor 2 is missing: the cache stores a key AND a value per token, head and layer."), expected // 2),
            (say("only the KEY/VALUE heads are cached: with grouped-query attention use n_kv_heads, not n_heads."),
             2 * L * H * hd * T * B * nbytes),
            (say("you counted values, not bytes: multiply by bytes_per_value (2 for bf16/fp16, 4 for fp32)."),
             2 * L * KV * hd * T * B),
            (say("every layer has its own cache: multiply by n_layers."), 2 * KV * hd * T * B * nbytes),
            (say("every sequence in the batch has its own cache: multiply by batch_size."), 2 * L * KV * hd * T * nbytes),
        ])
    return say("exact byte counts for 4 configurations (SmolLM2 at 8K tokens: {a} MiB).", a=f"{2 * 30 * 3 * 64 * 8192 * 2 / 2**20:.0f}")
