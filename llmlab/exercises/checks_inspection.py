"""Checks for the exercises on looking inside a trained model: representation similarity with
linear CKA (ch. 14), the logit lens (ch. 15) and a steering vector (ch. 16)."""
from __future__ import annotations

import torch

from llmlab.exercises.compare import expect_tensor
from llmlab.exercises.core import Learner, generator
from llmlab.exercises.messages import say


def _cka(x: torch.Tensor, y: torch.Tensor, center: str | None = "columns", squared: bool = True) -> torch.Tensor:
    if center == "columns":
        x, y = x - x.mean(0, keepdim=True), y - y.mean(0, keepdim=True)  # centre each feature over the examples
    elif center == "rows":
        x, y = x - x.mean(1, keepdim=True), y - y.mean(1, keepdim=True)
    p = 2 if squared else 1
    cross = torch.linalg.matrix_norm(y.T @ x) ** p                     # ||Y^T X||_F^2
    return cross / (torch.linalg.matrix_norm(x.T @ x) * torch.linalg.matrix_norm(y.T @ y)) ** (p / 2)


def check_linear_cka(fn: Learner) -> str:
    """linear_cka(x, y) -> scalar: ||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F), where Xc, Yc are x (n, d1)
    and y (n, d2) with each column's mean (over the n examples) subtracted."""
    g = generator(67)
    for n, d1, d2 in [(6, 3, 4), (10, 5, 5), (8, 4, 2)]:
        x = torch.randn(n, d1, generator=g) + 2
        y = x[:, :1] @ torch.randn(1, d2, generator=g) + torch.randn(n, d2, generator=g) + 1
        got = fn(x.double(), y.double(), names=("x", "y"))
        expect_tensor(fn, got, _cka(x.double(), y.double()), atol=1e-6, mistakes=[
            (say("the features were not centred: subtract each column's mean over the examples "
             "(x - x.mean(0, keepdim=True)) before the products."), _cka(x.double(), y.double(), center=None)),
            (say("you centred the rows; centre each COLUMN (feature) over the n examples: mean(dim=0)."),
             _cka(x.double(), y.double(), center="rows")),
            (say("the norms in linear CKA are squared in the numerator: ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F)."),
             _cka(x.double(), y.double(), squared=False)),
        ])
    return say("linear CKA with centred features matches on 3 hidden pairs of representations.")


def check_logit_lens(fn: Learner) -> str:
    """logit_lens(resid, final_norm, unembed) -> logits: decode a residual stream (B, T, d) from any layer
    as if it were the last: unembed(final_norm(resid)) -> (B, T, V)."""
    g = generator(71)
    d, V = 6, 10
    w_norm = torch.rand(d, generator=g) + 0.5
    w_out = torch.randn(d, V, generator=g)

    def final_norm(h):
        return h / (h.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt() * w_norm

    def unembed(h):
        return h @ w_out
    for shape in [(1, 3, d), (2, 4, d)]:
        resid = torch.randn(*shape, generator=g) * 5
        got = fn(resid, final_norm, unembed, names=("resid", "final_norm", "unembed"))
        expected = unembed(final_norm(resid))
        expect_tensor(fn, got, expected, atol=1e-4, mistakes=[
            (say("the final norm is missing: the LM head was trained on NORMALISED vectors, so apply final_norm "
             "before unembed. Without it the scale of the residual stream distorts the logits."), unembed(resid)),
            (say("you returned probabilities; the exercise asks for the logits (no softmax)."), torch.softmax(expected, -1)),
            (say("you returned only the last position; decode every position (B, T, V)."), expected[:, -1]),
        ])
    return say("final norm, then unembedding, at every position: correct on two hidden residual streams.")


def check_steering_vector(fn: Learner) -> str:
    """steering_vector(acts_pos, acts_neg) -> (d,): the mean activation over the prompts WITH the concept
    (acts_pos, (N, d)) minus the mean over the prompts without it (acts_neg, (M, d))."""
    g = generator(73)
    for N, M, d in [(3, 5, 4), (6, 2, 8)]:
        pos, neg = torch.randn(N, d, generator=g) + 1, torch.randn(M, d, generator=g)
        got = fn(pos, neg, names=("acts_pos", "acts_neg"))
        expected = pos.mean(0) - neg.mean(0)
        expect_tensor(fn, got, expected, atol=1e-5, mistakes=[
            (say("the sign is reversed: the direction points FROM the prompts without the concept TO the prompts "
             "with it, mean(acts_pos) - mean(acts_neg)."), -expected),
            (say("you summed instead of averaging: the two groups have different sizes, so sums do not compare; "
             "use .mean(dim=0)."), pos.sum(0) - neg.sum(0)),
            (say("you normalised the vector to unit length; return the raw difference of means (its length is "
             "part of the information: how far apart the two groups are)."), expected / expected.norm()),
            (say("the mean must be over the prompts (dim 0), giving one d-dimensional vector."),
             pos.mean(1) - neg.mean(1) if N == M else None),
        ])
    return say("difference of mean activations (with minus without) on two hidden groups.")
