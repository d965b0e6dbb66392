"""Checks for the build-it exercises on causal methods (ch. 15): causal tracing (noise the subject,
restore one state) and direct logit attribution with the final norm's scale frozen.

Each check runs the learner's function on a small random llmlab model (seeded, so the hidden cases
are the same every time), compares it with an independent reference, and names the classic mistakes
when the answer matches one of them. The chapter then runs the same function on the real model next
to llmlab's own `causal_trace` and `direct_logit_attribution`.
"""
from __future__ import annotations

import torch

from llmlab.exercises.compare import expect_tensor
from llmlab.exercises.core import Learner, generator


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
        expect_tensor(fn, got, v["right"].float(), atol=1e-5, rtol=1e-4, what="p(answer) after one restore", mistakes=[
            ("this is the clean run's probability: either the noise is missing from the restored run, or you "
             "restored every position (which gives the clean run back). Keep the noise on the subject's "
             "embeddings; only ONE state (after block `layer`, at `position`) comes from the clean run.",
             v["clean"].float()),
            ("this is the corrupted run's probability: nothing was restored. Replace the residual stream after "
             "block `layer` at `position` (hook_name(layer, 'resid_post')) with the clean run's value.",
             v["corrupted"].float()),
            ("you restored the stream that ENTERS block `layer` (resid_pre); restore what LEAVES it "
             "(hook_name(layer, 'resid_post')).", v["pre"].float()),
            ("you returned the answer's logit; return its probability (softmax over the vocabulary at the "
             "last position).", v["logit"].float()),
            ("you restored every position of that block; restore only `position`, the others stay corrupted.",
             v["all_restored"].float()),
            ("the noise must go on the subject's positions only (x[:, subject] += noise), not on every token.",
             v["all_noised"].float()),
        ])
    return ("causal tracing matches on 4 hidden (prompt, subject, block, position) cases of a small model: "
            "noise on the subject, one clean state restored.")


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
        logit = (h * torch.rsqrt(h.pow(2).mean() + eps) * weight) @ row
        assert torch.allclose(expected.sum(), logit)                    # the reference adds up
        got = fn(parts.clone(), weight.clone(), eps, row.clone(), names=("parts", "norm_weight", "eps", "unembed_row"))
        expect_tensor(fn, got, expected, atol=1e-6, rtol=1e-5, what="one share per part", mistakes=[
            ("each part was divided by its OWN rms; the divisor is the rms of the sum h = parts.sum(0), "
             "frozen at its value on this run. Only then do the shares add up to the logit.",
             _shares(parts, weight, eps, row, per_part=True)),
            ("the norm's per-channel weight is missing: multiply by norm_weight before the dot product with "
             "the unembedding row.", _shares(parts, weight, eps, row, no_weight=True)),
            ("the final norm's scale is missing: divide every part by rms(h) = sqrt(mean(h^2) + eps); the LM "
             "head reads normalised vectors.", _shares(parts, weight, eps, row, no_norm=True)),
            ("RMSNorm does not subtract the mean (LayerNorm does): divide by the root mean square only.",
             _shares(parts, weight, eps, row, centred=True)),
        ])
    return "the shares match on 3 hidden sets of parts and add up to the logit of the RMSNorm readout."


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
        expect_tensor(fn, got, _induction(pattern, L), atol=1e-5, what="one score per head", mistakes=[
            ("you read the weight on t - L, the earlier copy of the CURRENT token (a duplicate-token head); an "
             "induction head looks one further, at t - L + 1: the token that came after it.",
             _induction(pattern, L, offset=0)),
            ("you read the weight on t - 1, the previous token (a previous-token head); the induction score "
             "reads key t - L + 1.", _previous_token(pattern, L)),
        ])
    return "the induction score matches on 3 hidden sets of attention patterns (an induction head planted in each)."
