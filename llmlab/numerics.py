"""What "the same numbers" means: bit-for-bit, or equal up to floating-point rounding.

Two computations of one quantity can agree in two ways, and the book says which:

* **Bit for bit** (`assert_same_bits`): the same operations in the same order on the same inputs give the
  same bits on every machine. Use it only where that is true (a lookup, a copy, a reshape, a sort, a
  generation that repeats itself with the same seed), and say why next to the assert.
* **Up to rounding** (`assert_same_up_to_rounding`): the same mathematics in a different order. A
  matrix product on one row and on five rows, a sum split into tiles, the same model on another CPU:
  the computer adds the same terms in another order, and a float32 sum rounds after every addition, so
  the last bits differ. How much they may differ is derived below, not guessed.

The rule (`rounding_tolerance`)
-------------------------------
A sum of n terms in floating point, computed in any order, carries an error of at most about
n * u * sum|terms| (u = eps / 2, the unit roundoff; Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., section 3.1). That bound assumes every rounding goes the same way; in practice
the roundings are independent and their errors add like a random walk, so the error grows like
sqrt(n) * u * sum|terms| (Higham and Mary, "A new approach to probabilistic rounding error analysis",
SIAM J. Sci. Comput. 41(5), 2019). Two orders each carry such an error, so they differ by about twice
that. A value at the end of a chain of sums (a layer's output feeds the next layer's products)
collects the errors of every stage it passed through; `depth` is the number of terms summed along
that chain (`forward_depth` counts it for a whole model). So the tolerance is

    tolerance = SLACK * sqrt(depth) * eps * scale

with eps of the compared dtype (float32: 2**-23 = 1.19e-7), `scale` the size of the compared numbers
(by default the largest |expected|: rounding errors are relative to the size of the terms, not to
one element's value, which may be a small number left after cancellation, so one absolute tolerance
holds for the whole tensor and no element gets a relative one), and SLACK = 16, the room for what the
random-walk estimate leaves out: the terms of a dot product are often larger than its result (a
logit of 20 is a sum of products of a few units each), and a norm or a softmax can enlarge a
difference that reaches it. The constant was set against the kernel paths that the tests rehearse:
tests/test_kernel_paths.py runs the pages that compare two computation paths with MKL on SSE4.2 and on
AVX2, one thread and two, and fails if any comparison uses more than a quarter of its tolerance (on a
2-core AMD EPYC the most used was under a tenth).

A difference beyond the tolerance is not rounding: it is a different computation, and the error
says so.

>>> import torch
>>> a = torch.tensor([1.0, 2.0, 3.0])
>>> assert_same_bits(a, a.clone())
>>> assert_same_up_to_rounding(a + 1e-7, a, depth=10) < 1e-6
True
>>> assert_same_up_to_rounding(a + 1e-3, a, depth=10)
Traceback (most recent call last):
    ...
AssertionError: the two results differ by up to 0.001 (at index (0,): 1.001 against 1); float32 rounding over 10 summed terms allows only 1.81e-05 (= 16 x sqrt(10) x eps 1.19e-07 x scale 3). A difference this large is not rounding: the two computations compute different things.
"""
from __future__ import annotations

import math
import numbers
import os

import numpy as np
import torch

SLACK = 16

__all__ = ["SLACK", "rounding_tolerance", "assert_same_up_to_rounding", "assert_same_bits", "forward_depth",
           "largest_difference"]


def _as_tensor(name: str, value) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, numbers.Real) and not isinstance(value, np.generic):
        # a Python number read off a result (`.item()`, `float(...)`): the book computes in float32
        return torch.tensor(float(value), dtype=torch.float32)
    if isinstance(value, (np.ndarray, np.generic, list, tuple)):
        return torch.as_tensor(np.asarray(value))
    raise TypeError(f"{name} must be a tensor, a NumPy array or a number; got {type(value).__name__}.")


def _pair(actual, expected, what: str) -> tuple[torch.Tensor, torch.Tensor]:
    a, e = _as_tensor("actual", actual), _as_tensor("expected", expected)
    if a.shape != e.shape:
        raise AssertionError(f"{what} have different shapes: {tuple(a.shape)} against {tuple(e.shape)}; "
                             "compare the same positions (index or reshape one of them first).")
    return a, e


def _eps(*tensors: torch.Tensor) -> float:
    """The machine epsilon of the least precise floating dtype among the inputs (float32 for integers)."""
    eps = [torch.finfo(t.dtype).eps for t in tensors if t.is_floating_point()]
    return max(eps) if eps else torch.finfo(torch.float32).eps


def rounding_tolerance(expected, depth: int, *, scale: float | None = None, dtype=None,
                       slack: float = SLACK) -> float:
    """How far two evaluation orders of the same sums may differ: slack * sqrt(depth) * eps * scale.

    `depth`: how many terms are summed along the way to these numbers (a product with inner
    dimension 576 sums 576; a whole model: `forward_depth`). `scale`: the size of the numbers
    (default: the largest |expected|). `dtype`: whose eps (default: `expected`'s, float32 for integers).
    """
    if isinstance(depth, bool) or not isinstance(depth, numbers.Integral) or depth < 1:
        raise ValueError(f"depth must be a whole number >= 1 (how many terms are summed along the way); "
                         f"got {depth!r}.")
    e = _as_tensor("expected", expected)
    if scale is None:
        finite = e[torch.isfinite(e)] if e.is_floating_point() else e
        scale = float(finite.abs().max()) if finite.numel() else 0.0
    eps = torch.finfo(dtype).eps if dtype is not None else _eps(e)
    return float(slack * math.sqrt(depth) * eps * scale)


def largest_difference(actual, expected) -> float:
    """max |actual - expected|, computed in float64 on the CPU (0.0 for empty tensors)."""
    a, e = _pair(actual, expected, "the two results")
    if a.numel() == 0:
        return 0.0
    return float((a.double().cpu() - e.double().cpu()).abs().max())


def assert_same_up_to_rounding(actual, expected, *, depth: int, scale: float | None = None, dtype=None,
                               slack: float = SLACK, what: str = "the two results") -> float:
    """Assert that `actual` equals `expected` up to rounding (see the module's rule); return the largest difference.

    The precision is that of the less precise input (a Python number counts as float32), or `dtype` where
    given (the dtype the two computations ran in). Infinities and NaNs must sit at the same places (a
    masked score is -inf in both).
    """
    a, e = _pair(actual, expected, what)
    a64, e64 = a.double().cpu(), e.double().cpu()
    bad_a, bad_e = ~torch.isfinite(a64), ~torch.isfinite(e64)
    if not torch.equal(bad_a, bad_e) or not torch.equal(a64[bad_a].nan_to_num(0.0), e64[bad_e].nan_to_num(0.0)):
        raise AssertionError(f"{what} have NaN or infinite values at different places "
                             f"({int(bad_a.sum())} in actual, {int(bad_e.sum())} in expected).")
    eps = torch.finfo(dtype).eps if dtype is not None else _eps(a, e)
    dtype = dtype or next((t.dtype for t in (a, e) if t.is_floating_point() and torch.finfo(t.dtype).eps == eps), None)
    tol = rounding_tolerance(e, depth, scale=scale, dtype=dtype, slack=slack)
    if a.numel() == 0:
        return 0.0
    diff = (a64 - e64).abs().masked_fill(bad_a, 0.0)
    largest = float(diff.max())
    _log(depth, largest, tol)
    if largest > tol:
        flat = int(diff.argmax())
        index = tuple(int(i) for i in np.unravel_index(flat, tuple(a.shape))) if a.dim() else ()
        used_scale = tol / (slack * math.sqrt(depth) * eps) if tol else 0.0
        name = {torch.finfo(torch.float32).eps: "float32", torch.finfo(torch.float64).eps: "float64",
                torch.finfo(torch.float16).eps: "float16", torch.finfo(torch.bfloat16).eps: "bfloat16"}.get(eps, "float")
        raise AssertionError(
            f"{what} differ by up to {largest:.3g} (at index {index}: {float(a64[index]):.6g} against "
            f"{float(e64[index]):.6g}); {name} rounding over {depth} summed terms allows only {tol:.3g} "
            f"(= {slack:g} x sqrt({depth}) x eps {eps:.3g} x scale {used_scale:.3g}). A difference this large "
            f"is not rounding: the two computations compute different things.")
    return largest


def _log(depth: int, largest: float, tol: float) -> None:
    """With LLMLAB_ROUNDING_LOG=FILE, append each comparison's numbers to FILE (how the slack was measured)."""
    path = os.environ.get("LLMLAB_ROUNDING_LOG")
    if path:
        import json
        import sys

        caller = sys._getframe(2)
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"where": f"{caller.f_code.co_filename}:{caller.f_lineno}", "depth": depth, "largest": largest,
                                "tolerance": tol, "used": largest / tol if tol else 0.0}) + "\n")


def assert_same_bits(actual, expected, *, what: str = "the two results") -> None:
    """Assert bit-for-bit equality: same shape, same dtype, the same value in every element.

    Right only where the two sides run the same operations in the same order (or no arithmetic at all).
    """
    a, e = _pair(actual, expected, what)
    if a.dtype != e.dtype:
        raise AssertionError(f"{what} have different dtypes ({a.dtype} against {e.dtype}), so they cannot be "
                             "the same bits; convert one of them first if that is what you mean.")
    if not torch.equal(a.cpu(), e.cpu()):
        differ = a.cpu() != e.cpu()
        if a.is_floating_point():
            differ &= ~(a.cpu().isnan() & e.cpu().isnan())
        n = int(differ.sum())
        if n == 0:
            return
        largest = float((a.double().cpu() - e.double().cpu()).abs().nan_to_num(math.inf)[differ].max()) \
            if a.is_floating_point() or e.is_floating_point() else None
        extra = f", by up to {largest:.3g}" if largest is not None else ""
        raise AssertionError(f"{what} are not bit-for-bit equal: {n} of {a.numel()} elements differ{extra}. "
                             "If the two sides add in different orders, they are equal only up to rounding: "
                             "use assert_same_up_to_rounding.")


def forward_depth(config, n_tokens: int, n_layers: int | None = None, head: bool = True) -> int:
    """How many terms are summed on the way from the embedding to the logits (or a block's output).

    Per block: the query/key/value products (d_model terms), a score (head_dim), the weighted sum of
    values (up to n_tokens), the output projection (n_heads * head_dim), the FFN's first product
    (d_model) and its second (d_ff). Then the LM head (d_model), when `head`.
    """
    layers = config.n_layers if n_layers is None else n_layers
    per_block = (config.d_model + config.head_dim + max(1, int(n_tokens)) + config.n_heads * config.head_dim
                 + config.d_model + config.d_ff)
    return int(layers * per_block + (config.d_model if head else 0))
