"""Check for chapter 15's build-it exercise "a tuned lens fitted in closed form".

Unlike the checks in checks_interp.py, this one runs on the real SmolLM2: its residual stream on six short
texts is captured once per process (one load and one forward pass) and handed to the learner as plain
tensors, with a random slice of the LM head (the grader's channel carries plain data). The learner fits
one block's affine map by ridge regression on the training rows and returns the tuned lens's logits at
the held-out rows; the check compares them with an independent reference and names the usual mistakes.
"""
from __future__ import annotations

import functools

import torch

from llmlab.exercises.compare import expect_tensor
from llmlab.exercises.core import Learner, generator
from llmlab.exercises.messages import say

# How far a learner's logits may be from the reference's. A learner's float32 solve of the ridge system
# differs from the float64 reference by float32 rounding amplified by the system's conditioning: measured
# up to 9e-4 on logits of size 20 to 24 (ridge 100, the worst conditioned; 1e-4 at ridge 1000). The
# smallest mistake the check names moves them by 1.2 or more. 2e-2 (plus 1e-3 of each logit) is
# deliberately between the two: 20 times the float32 differences, 60 times below the mistakes.
ATOL, RTOL = 2e-2, 1e-3

TUNED_TEXTS = [
    "The old bridge over the river was closed for repairs during the whole summer.",
    "She wrote the shopping list on the back of an envelope and left it on the table.",
    "Every morning the baker opens the shop at six and sells the first loaves warm.",
    "The children counted the boats in the harbour while their parents had lunch.",
    "A thick fog covered the valley, and the farmers waited for the sun to burn it away.",
    "He keeps his tools in a wooden box that belonged to his grandfather.",
]


@functools.lru_cache(maxsize=1)
def _tuned_lens_data():
    """SmolLM2's residual stream at every token but the first of each text (L+1, N, d), which text each row
    comes from (N,), and the final norm's weight, eps and the LM head's matrix, all on the CPU."""
    import llmlab
    from llmlab.hooks import hook_name
    from llmlab.inspection import hooks

    model, tok = llmlab.load("smollm2-135m")
    names = [hook_name(0, "resid_pre")] + [hook_name(i, "resid_post") for i in range(model.config.n_layers)]
    ids, mask = tok.encode_batch(TUNED_TEXTS)
    kept = {}
    with torch.no_grad(), hooks(model, {n: (lambda x, n=n: kept.__setitem__(n, x)) for n in names}):
        model(ids, attention_mask=mask, logits_to_keep=1)
    real = mask.bool().to(model.device)
    real[torch.arange(len(TUNED_TEXTS)), real.int().argmax(1)] = False     # drop each text's first token
    stream = torch.stack([kept[n][real] for n in names]).float().cpu()    # (L+1, N, d)
    text = torch.arange(len(TUNED_TEXTS))[:, None].expand_as(mask)[real.cpu()]   # (N,)
    norm = model.final_norm
    return (stream, text, norm.weight.detach().float().cpu(), float(norm.eps),
            model.lm_head.weight.detach().float().cpu())


def _tuned(stream, train, layer, weight, eps, unembed, ridge, *, source=None, fit_rows=None, target="stream",
           norm="full", transposed=False, bias="centred", probs=False):
    """The tuned lens's logits at the held-out rows, the right way (defaults) or with one typical mistake."""
    s = stream.double()
    x = s[layer + 1 if source is None else source]                  # (N, d)
    y = s[-1]
    if target == "normed":
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps) * weight.double()
    d = y - x if target != "itself" else y                          # what the map must add (or the whole target)
    rows = train if fit_rows is None else fit_rows
    xt, dt = x[rows], d[rows]
    eye = torch.eye(x.shape[1], dtype=s.dtype)
    if bias == "centred":
        mx, md = xt.mean(0), dt.mean(0)
        a = torch.linalg.solve((xt - mx).T @ (xt - mx) + ridge * eye, (xt - mx).T @ (dt - md))    # (d, d)
        b = md - mx @ a
    elif bias == "none":
        a, b = torch.linalg.solve(xt.T @ xt + ridge * eye, xt.T @ dt), 0.0
    else:                                                            # a column of ones inside the ridge
        xa = torch.cat([xt, torch.ones(len(xt), 1, dtype=s.dtype)], 1)
        ab = torch.linalg.solve(xa.T @ xa + ridge * torch.eye(xa.shape[1], dtype=s.dtype), xa.T @ dt)
        a, b = ab[:-1], ab[-1]
    x = x[~train]
    if transposed:
        pred = (x - xt.mean(0)) @ a.T + dt.mean(0)
    else:
        pred = x @ a + b
    h = pred if target == "itself" else x + pred                     # the predicted final stream
    if target != "normed" and norm != "none":                        # (a normalised target is read as it is)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        h = h * weight.double() if norm == "full" else h
    logits = h @ unembed.double().T                                  # (n_held_out, V)
    return torch.softmax(logits, -1) if probs else logits


def check_tuned_lens(fn: Learner) -> str:
    """tuned_lens(stream, train, layer, norm_weight, eps, unembed, ridge) -> (n_held_out, V) logits.

    stream (L+1, N, d) is the residual stream at N token positions: stream[0] the embedding (what enters
    block 0), stream[i + 1] the stream after block i, stream[-1] the final stream, before the final norm.
    train (N,) is True on the rows to fit on. With x = stream[layer + 1] and the change D = stream[-1] - x,
    fit A (d, d) and b (d,) on the training rows by ridge regression, min |(x - mean x) A - (D - mean D)|^2
    + ridge |A|^2 (the means over the training rows, b = mean D - (mean x) A), and return, at the
    held-out rows, unembed @ RMSNorm(x + x A + b): the logits of the tuned lens."""
    stream, text, weight, eps, unembed = _tuned_lens_data()
    n_texts = len(TUNED_TEXTS)
    g = generator(101)
    fn.error_hints = [("singular", say("X^T X has no inverse when there are fewer training rows than dimensions: "
                                   "add ridge * torch.eye(d) before solving."))]
    for low, high in [(2, 12), (13, 27)]:
        layer = int(torch.randint(low, high + 1, (1,), generator=g))
        held = torch.randperm(n_texts, generator=g)[:2]
        train = ~torch.isin(text, held)
        ridge = float([100.0, 300.0, 1000.0][int(torch.randint(0, 3, (1,), generator=g))])
        rows = torch.randperm(unembed.shape[0], generator=g)[:256].sort().values   # a slice of the vocabulary
        u = unembed[rows]
        args = (stream, train, layer, weight, eps, u, ridge)
        expected = _tuned(*args)
        got = fn(stream.clone(), train.clone(), layer, weight.clone(), eps, u.clone(), ridge,
                 names=("stream", "train", "layer", "norm_weight", "eps", "unembed", "ridge"))
        exploded = (isinstance(got, torch.Tensor) and got.shape == expected.shape and bool(torch.isfinite(got).all())
                    and float(got.abs().max()) > 20 * float(expected.abs().max()))
        blown_up = [(say("the logits are huge: the map blew up. With fewer training rows than dimensions, X^T X has no "
                     "inverse (or a nearly singular one); add ridge * torch.eye(d) before solving."), got)] if exploded else []
        right = (isinstance(got, torch.Tensor) and got.shape == expected.shape and
                 bool(torch.isclose(got.detach().cpu().double(), expected, atol=ATOL, rtol=RTOL).all()))
        expect_tensor(fn, got, expected.float(), atol=ATOL, rtol=RTOL, what=say("the tuned lens's logits at the held-out "
                      "rows"), mistakes=[] if right else [     # (the wrong variants cost a solve each: only when needed)
            (say("you fitted the map on the held-out rows (~train). Fit on the training rows only and apply the map to "
             "the held-out ones: a lens scored on the rows it was fitted on looks better than it is."),
             _tuned(*args, fit_rows=~train)),
            (say("you fitted the map on every row, the held-out ones included. Fit on stream[:, train] only and apply "
             "it to the held-out rows: a lens scored on the rows it was fitted on looks better than it is."),
             _tuned(*args, fit_rows=torch.ones_like(train))),
            (say("off by one block: stream[layer] is the stream that ENTERS block `layer` (stream[0] is the "
             "embedding); the stream after block `layer` is stream[layer + 1]."), _tuned(*args, source=layer)),
            (say("off by one block: the stream after block `layer` is stream[layer + 1], not stream[layer + 2]."),
             _tuned(*args, source=layer + 2)),
            (say("the final norm is missing: the unembedding reads NORMALISED vectors. Apply the final RMSNorm to the "
             "predicted final stream (divide by sqrt(mean(h^2) + eps), multiply by norm_weight) before unembed."),
             _tuned(*args, norm="none")),
            (say("the final norm's weight is missing: after dividing by sqrt(mean(h^2) + eps), multiply by norm_weight "
             "before the unembedding."), _tuned(*args, norm="no_weight")),
            (say("you fitted the map to the normalised final stream. The target is the final residual stream BEFORE "
             "the final norm (stream[-1]); the norm comes after the map, as in the logit lens."),
             _tuned(*args, target="normed")),
            (say("your map is transposed. With one position per row, the prediction is x @ A, where "
             "A = solve(X^T X + ridge I, X^T D) is (d_in, d_out); x @ A.T mixes the dimensions the wrong way."),
             _tuned(*args, transposed=True)),
            (say("the bias is missing: centre x and D on the training rows (subtract their means) before solving and "
             "add b = mean D - (mean x) A, or the map must explain the streams' large mean by itself."),
             _tuned(*args, bias="none")),
            (say("the bias is inside the ridge (a column of ones penalised like A). Centre x and D on the training "
             "rows instead, so that only A is pulled towards 0."), _tuned(*args, bias="ones_column")),
            (say("you fitted the final stream itself, so the ridge pulls the whole map towards 0. Fit the CHANGE "
             "D = stream[-1] - x and predict x + x A + b: then the ridge pulls the lens towards the logit lens."),
             _tuned(*args, target="itself")),
            (say("you returned probabilities; return the logits (no softmax)."), _tuned(*args, probs=True)),
        ] + blown_up)
    return (say("the tuned lens matches on 2 hidden (block, held-out texts, ridge) cases of SmolLM2's own residual "
            "stream, fitted on the training rows and read through the final norm and the unembedding."))
