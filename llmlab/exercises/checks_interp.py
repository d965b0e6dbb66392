"""Checks for the build-it exercises on causal methods (ch. 15): causal tracing (noise the subject,
restore one state) and direct logit attribution with the final norm's scale frozen; (ch. 16) activation
patching of one attention head.

Each check runs the learner's function on a small random llmlab model (seeded, so the hidden cases
are the same every time), compares it with an independent reference, and names the classic mistakes
when the answer matches one of them. The chapter then runs the same function on the real model next
to llmlab's own `causal_trace` and `direct_logit_attribution`.
(The tuned lens of ch. 15, checked on SmolLM2's own residual stream, is in checks_tuned_lens.py.)
"""
from __future__ import annotations

import torch

from llmlab.exercises.compare import expect_tensor
from llmlab.exercises.core import Learner, generator
from llmlab.numerics import assert_same_up_to_rounding
from llmlab.exercises.messages import say


def _tiny_model(seed: int):
    from llmlab.config import ModelConfig
    from llmlab.model import Transformer

    torch.manual_seed(seed)
    return Transformer(ModelConfig.preset("tiny-llama")).eval()


@torch.no_grad()
def _trace_variants(model, ids, subject, layer, position, answer, noise) -> dict:
    """p(answer) at the last position for the right method and for the typical wrong ones."""
    from llmlab.hooks import hook_name
    from llmlab.inspection import capture, hooks

    post = hook_name(layer, "resid_post")
    pre = hook_name(layer, "resid_pre")
    _, cache = capture(model, None, ids, names=[post, pre])

    def add_noise(where):
        def fn(x):
            x = x.clone()
            x[:, where] += noise.to(x.dtype)
            return x
        return fn

    def restore(name, positions):
        def fn(x):
            x = x.clone()
            x[:, positions] = cache[name][:, positions].to(x.dtype)
            return x
        return fn

    def prob(fns, logits=False):
        with hooks(model, fns):
            out = model(ids)[0, -1].double()
        return out[answer] if logits else torch.softmax(out, -1)[answer]

    T = ids.shape[1]
    every = list(range(T))
    return {
        "right": prob({"hook_embed": add_noise(subject), post: restore(post, [position])}),
        "corrupted": prob({"hook_embed": add_noise(subject)}),
        "clean": prob({}),
        "pre": prob({"hook_embed": add_noise(subject), pre: restore(pre, [position])}),
        "logit": prob({"hook_embed": add_noise(subject), post: restore(post, [position])}, logits=True),
        "all_noised": prob({"hook_embed": lambda x: x + noise.mean(0).to(x.dtype),
                            post: restore(post, [position])}),
        "all_restored": prob({"hook_embed": add_noise(subject), post: restore(post, every)}),
    }


def check_restore_one(fn: Learner) -> str:
    """restore_one(model, ids, subject, layer, position, answer, noise) -> p(answer) at the last position,
    when `noise` (len(subject), d) is added to the token embeddings (hook_embed) at the subject positions
    and the residual stream after block `layer` (blocks.{layer}.hook_resid_post) at `position` is put
    back to its value in the clean run."""
    model = _tiny_model(81)
    g = generator(83)
    cases = [(8, [1, 2], 0, 2), (9, [2, 3, 4], 1, 8), (7, [0], 1, 0), (10, [3, 4], 0, 5)]
    for T, subject, layer, position in cases:
        ids = torch.randint(0, model.config.vocab_size, (1, T), generator=g)
        answer = int(torch.randint(0, model.config.vocab_size, (1,), generator=g))
        noise = torch.randn(len(subject), model.config.d_model, generator=g) * 3.0
        v = _trace_variants(model, ids, subject, layer, position, answer, noise)
        got = fn(model, ids, list(subject), layer, position, answer, noise.clone(),
                 names=("model", "ids", "subject", "layer", "position", "answer", "noise"))
        expect_tensor(fn, got, v["right"].float(), atol=1e-5, rtol=1e-4, what=say("p(answer) after one restore"), mistakes=[
            (say("this is the clean run's probability: either the noise is missing from the restored run, or you "
             "restored every position (which gives the clean run back). Keep the noise on the subject's "
             "embeddings; only ONE state (after block `layer`, at `position`) comes from the clean run."),
             v["clean"].float()),
            (say("this is the corrupted run's probability: nothing was restored. Replace the residual stream after "
             "block `layer` at `position` (hook_name(layer, 'resid_post')) with the clean run's value."),
             v["corrupted"].float()),
            (say("you restored the stream that ENTERS block `layer` (resid_pre); restore what LEAVES it "
             "(hook_name(layer, 'resid_post'))."), v["pre"].float()),
            (say("you returned the answer's logit; return its probability (softmax over the vocabulary at the "
             "last position)."), v["logit"].float()),
            (say("you restored every position of that block; restore only `position`, the others stay corrupted."),
             v["all_restored"].float()),
            (say("the noise must go on the subject's positions only (x[:, subject] += noise), not on every token."),
             v["all_noised"].float()),
        ])
    return (say("causal tracing matches on 4 hidden (prompt, subject, block, position) cases of a small model: "
            "noise on the subject, one clean state restored."))


def _shares(parts, weight, eps, row, per_part=False, no_weight=False, no_norm=False, centred=False):
    h = parts.sum(0)
    if centred:
        parts, h = parts - parts.mean(-1, keepdim=True), h - h.mean()
    w = torch.ones_like(weight) if no_weight else weight
    if no_norm:
        return (parts * w) @ row
    if per_part:
        scale = torch.rsqrt(parts.pow(2).mean(-1, keepdim=True) + eps)   # (n, 1): each part its own rms
    else:
        scale = torch.rsqrt(h.pow(2).mean() + eps)                       # the final stream's rms, frozen
    return (parts * scale * w) @ row


def check_logit_shares(fn: Learner) -> str:
    """logit_shares(parts, norm_weight, eps, unembed_row) -> (n_parts,): parts (n_parts, d) add up to the
    final residual vector h; each share is (part / rms(h)) * norm_weight . unembed_row, with
    rms(h) = sqrt(mean(h^2) + eps) frozen at h, so the shares add up to the logit of the RMSNorm readout."""
    g = generator(89)
    for n, d in [(5, 8), (9, 16), (3, 4)]:
        parts = (torch.randn(n, d, generator=g) * torch.linspace(0.5, 3, n)[:, None]).double()
        weight = (torch.rand(d, generator=g) + 0.5).double()
        row = torch.randn(d, generator=g).double()
        eps = 1e-6
        expected = _shares(parts, weight, eps, row)
        h = parts.sum(0)
        scale = torch.rsqrt(h.pow(2).mean() + eps)
        logit = (h * scale * weight) @ row
        # the reference adds up: the same float64 terms, summed part by part or channel by channel (n + d
        # terms, and d more in h's mean square), equal up to float64 rounding at the size of the terms
        assert_same_up_to_rounding(expected.sum(), logit, depth=n + 2 * d,
                                   scale=float((parts * scale * weight * row).abs().sum()))
        got = fn(parts.clone(), weight.clone(), eps, row.clone(), names=("parts", "norm_weight", "eps", "unembed_row"))
        expect_tensor(fn, got, expected, atol=1e-6, rtol=1e-5, what=say("one share per part"), mistakes=[
            (say("each part was divided by its OWN rms; the divisor is the rms of the sum h = parts.sum(0), "
             "frozen at its value on this run. Only then do the shares add up to the logit."),
             _shares(parts, weight, eps, row, per_part=True)),
            (say("the norm's per-channel weight is missing: multiply by norm_weight before the dot product with "
             "the unembedding row."), _shares(parts, weight, eps, row, no_weight=True)),
            (say("the final norm's scale is missing: divide every part by rms(h) = sqrt(mean(h^2) + eps); the LM "
             "head reads normalised vectors."), _shares(parts, weight, eps, row, no_norm=True)),
            (say("RMSNorm does not subtract the mean (LayerNorm does): divide by the root mean square only."),
             _shares(parts, weight, eps, row, centred=True)),
        ])
    return say("the shares match on 3 hidden sets of parts and add up to the logit of the RMSNorm readout.")


def _induction(pattern, length, offset=1):
    second = torch.arange(length, 2 * length - 1)                  # queries with a next token
    return pattern[:, :, second, second - length + offset].mean(dim=(0, 2))


def _previous_token(pattern, length):
    second = torch.arange(length, 2 * length - 1)
    return pattern[:, :, second, second - 1].mean(dim=(0, 2))


def check_induction_score(fn: Learner) -> str:
    """induction_score(pattern, length) -> (H,): pattern (B, H, 2L, 2L) is the attention of each head on
    B sequences of L random tokens followed by themselves. For the queries t = L .. 2L-2 (the second copy,
    each position that has a next token) take the weight on key t - L + 1, the token right after the
    earlier occurrence of the current token, and average over the queries and the sequences."""
    g = generator(97)
    for B, H, L in [(3, 4, 5), (2, 6, 8), (4, 2, 6)]:
        T = 2 * L
        scores = torch.randn(B, H, T, T, generator=g)
        t = torch.arange(T)
        scores[:, 0, t[L:], t[L:] - L + 1] += 6.0                   # head 0: an induction head
        scores[:, 1 % H, t[L:], t[L:] - L] += 6.0                   # head 1: attends to the same token
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        pattern = torch.softmax(scores.masked_fill(~causal, float("-inf")), -1)
        got = fn(pattern.clone(), L, names=("pattern", "length"))
        expect_tensor(fn, got, _induction(pattern, L), atol=1e-5, what=say("one score per head"), mistakes=[
            (say("you read the weight on t - L, the earlier copy of the CURRENT token (a duplicate-token head); an "
             "induction head looks one further, at t - L + 1: the token that came after it."),
             _induction(pattern, L, offset=0)),
            (say("you read the weight on t - 1, the previous token (a previous-token head); the induction score "
             "reads key t - L + 1."), _previous_token(pattern, L)),
        ])
    return say("the induction score matches on 3 hidden sets of attention patterns (an induction head planted in each).")


def _gqa_model(seed: int):
    """A small model with SmolLM2's head layout: 3 query heads share each key/value head."""
    import dataclasses

    from llmlab.config import ModelConfig
    from llmlab.model import Transformer

    torch.manual_seed(seed)
    config = dataclasses.replace(ModelConfig.preset("tiny-llama"), d_model=48, n_layers=3, n_heads=6, n_kv_heads=2,
                                 head_dim=8, d_ff=96, layer_types=("full",) * 3)
    return Transformer(config).eval()


@torch.no_grad()
def _patch_variants(model, clean, corrupt, layer, head, position, answer, wrong) -> dict:
    """The recovered fraction for the right method and for the typical wrong ones."""
    from llmlab.hooks import hook_name
    from llmlab.inspection import capture, hooks

    z, v = hook_name(layer, "attn.z"), hook_name(layer, "attn.v")
    out, post = hook_name(layer, "attn_out"), hook_name(layer, "resid_post")
    group = model.config.n_heads // model.config.n_kv_heads
    hd = model.config.head_dim
    caches = {run: capture(model, None, ids, names=[z, v, out, post])[1] for run, ids in
              [("clean", clean), ("corrupt", corrupt)]}

    def put(name, index, source="clean"):
        def fn(x):
            x = x.clone()
            x[index] = caches[source][name][index].to(x.dtype)
            return x
        return fn

    def last(ids, fns=None):
        with hooks(model, fns or {}):
            return model(ids)[0, -1].double()

    def diff(logits):
        return logits[answer] - logits[wrong]

    p = position
    c, x = diff(last(clean)), diff(last(corrupt))
    one = diff(last(corrupt, {z: put(z, (slice(None), p, head))}))
    frac = lambda patched: (patched - x) / (c - x)                     # noqa: E731
    probs = lambda ids, fns=None: torch.softmax(last(ids, fns), -1)     # noqa: E731
    pc, px = probs(clean), probs(corrupt)
    pp = probs(corrupt, {z: put(z, (slice(None), p, head))})
    pdiff = lambda q: q[answer] - q[wrong]                              # noqa: E731
    swapped = diff(last(clean, {z: put(z, (slice(None), p, head), "corrupt")}))
    return {
        "right": frac(one),
        "block": frac(diff(last(corrupt, {post: put(post, (slice(None), p))}))),
        "all_heads": frac(diff(last(corrupt, {z: put(z, (slice(None), p))}))),
        "after_o": frac(diff(last(corrupt, {out: put(out, (slice(None), p, slice(head * hd, (head + 1) * hd)))}))),
        "kv_index": frac(diff(last(corrupt, {z: put(z, (slice(None), p, head // group))}))),
        "v_head": frac(diff(last(corrupt, {v: put(v, (slice(None), head // group, p))}))),
        "every_position": frac(diff(last(corrupt, {z: put(z, (slice(None), slice(None), head))}))),
        "last_position": frac(diff(last(corrupt, {z: put(z, (slice(None), -1, head))}))),
        "not_normalised": one,
        "over_clean": one / c,
        "shifted_over_clean": (one - x) / c,
        "lost": (c - one) / (c - x),
        "probabilities": (pdiff(pp) - pdiff(px)) / (pdiff(pc) - pdiff(px)),
        "swapped": (swapped - c) / (x - c),
        "swapped_same_formula": frac(swapped),
    }


def check_patch_head(fn: Learner) -> str:
    """patch_head(model, clean_ids, corrupt_ids, layer, head, position, answer, wrong) -> the recovered
    fraction (a number): put the output of query head `head` of block `layer` (its slice of the o_proj
    input, hook_name(layer, "attn.z")[:, position, head]) from the clean run into the corrupted run at
    `position`, and return (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt), where LD is
    logit[answer] - logit[wrong] at the last position."""
    model = _gqa_model(101)
    g = generator(103)
    V = model.config.vocab_size
    cases = [(9, 1, 4, 8), (10, 1, 1, 6), (8, 2, 5, 7), (9, 0, 2, 3)]   # (T, block, query head, position)
    for T, layer, head, position in cases:
        for _ in range(20):                      # a case whose clean and corrupted runs differ clearly
            clean = torch.randint(0, V, (1, T), generator=g)
            corrupt = clean.clone()
            corrupt[0, :position + 1] = torch.randint(0, V, (position + 1,), generator=g)
            answer, wrong = (int(i) for i in torch.randperm(V, generator=g)[:2])
            v = _patch_variants(model, clean, corrupt, layer, head, position, answer, wrong)
            if abs(v["right"]) > 0.02 and abs(v["right"]) < 5:
                break
        got = fn(model, clean.clone(), corrupt.clone(), layer, head, position, answer, wrong,
                 names=("model", "clean_ids", "corrupt_ids", "layer", "head", "position", "answer", "wrong"))
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.reshape(())
        expect_tensor(fn, got, v["right"].float(), atol=1e-4, rtol=1e-3, what=say("recovered fraction"), mistakes=[
            (say("this is the fraction for patching the whole block's output (the residual stream after block "
             "`layer`); patch ONE head: hook_name(layer, 'attn.z')[:, position, head]."), v["block"].float()),
            (say("this is the fraction for patching all heads of the block at once (the attention layer's whole "
             "output); replace only head `head`: x[:, position, head]."), v["all_heads"].float()),
            (say("you sliced the attention output AFTER o_proj (hook_attn_out[..., head*head_dim:(head+1)*head_dim]); "
             "o_proj has already mixed the heads there, so no slice of it is one head. Patch the o_proj input, "
             "hook_name(layer, 'attn.z'), which keeps one (head_dim,) vector per query head."), v["after_o"].float()),
            (say("you patched query head head // group: that is the index of the key/value head this query head "
             "shares (GQA). hook_z has one slot per QUERY head: index it with `head` itself."),
             v["kv_index"].float()),
            (say("you patched the values of the shared key/value head (hook_v); with GQA that head feeds several "
             "query heads, and a value at `position` is read by later positions too. Patch the head's output, "
             "hook_name(layer, 'attn.z')[:, position, head]."), v["v_head"].float()),
            (say("you patched the head at every position; patch only `position`, the others stay corrupted."),
             v["every_position"].float()),
            (say("you patched the head at the last position; patch it at `position`."), v["last_position"].float()),
            (say("this is the patched run's logit difference itself; normalise it: (LD_patched - LD_corrupt) / "
             "(LD_clean - LD_corrupt), 0 = nothing recovered, 1 = all of it."), v["not_normalised"].float()),
            (say("you divided the patched logit difference by the clean one; subtract the corrupted run's first, "
             "top and bottom: (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt)."), v["over_clean"].float()),
            (say("the denominator must be LD_clean - LD_corrupt, not LD_clean alone."), v["shifted_over_clean"].float()),
            (say("this is the fraction NOT recovered (1 minus the answer): put LD_patched - LD_corrupt on top."),
             v["lost"].float()),
            (say("you used probabilities; the measure is the difference of the two LOGITS at the last position."),
             v["probabilities"].float()),
            (say("clean and corrupted are swapped: take the head's output from the CLEAN run and put it into the "
             "CORRUPTED run."), v["swapped"].float()),
            (say("clean and corrupted are swapped: take the head's output from the CLEAN run and put it into the "
             "CORRUPTED run."), v["swapped_same_formula"].float()),
        ])
    return (say("activation patching of one head matches on 4 hidden (prompt pair, block, head, position) cases of "
            "a small model with SmolLM2's head layout (3 query heads per key/value head)."))
