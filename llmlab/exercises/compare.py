"""Comparing what the learner's function returned with what was expected.

expect_tensor and expect_equal raise Mistake with a message that names the input, the expected and
the returned value and, when the answer equals a known wrong variant, the mistake behind it. Their
first argument is the learner (core.Learner: what was called, `last_call`, with which inputs,
`last_args`). When the grader counts partial credit (`learner.tally` is a list), an answer of the
right kind with wrong values is noted there instead of raised, and the check goes on.

>>> describe(torch.tensor([[1.0, 0.5], [0.25, 2.0]]), "x")
'x = tensor([[1., 0.5], [0.25, 2.]])'
"""
from __future__ import annotations

import math

import torch

from llmlab.exercises.results import Mistake
from llmlab.exercises.messages import say

# How close a learner's answer must be to the reference: |got - expected| <= ATOL + RTOL * |expected| at
# every element. Not bit for bit: a learner's function computes the reference's mathematics in its own
# order (its own sums, its own matrix products), and float32 rounds each order differently
# (llmlab.numerics). Not loose either: the mistakes a check names (a missing scale, the wrong axis, a
# forgotten weight) move values by 1e-2 of their size or more. The checks' inputs are small, sums of a
# few dozen terms, whose float32 rounding stays below 1e-6 of their size (sqrt(n) x 2^-24); RTOL = 1e-4
# is 100 times that, and 100 times below the smallest mistake; ATOL = 1e-5 covers values that cancel
# to near 0. The book's reference solutions use at most a tenth of it (tests/test_exercises.py). A check
# passes its own atol and rtol, derived the same way, where its numbers are larger or its sums longer
# (a whole block, a tuned lens).
ATOL, RTOL = 1e-5, 1e-4


def describe(value, name: str | None = None) -> str:
    """A short readable description: small tensors are printed, big ones by shape and dtype."""
    prefix = f"{name} = " if name else ""
    if isinstance(value, torch.Tensor):
        if value.numel() == 0:
            return prefix + say("an empty tensor of shape {shape}", shape=tuple(value.shape))
        if value.numel() <= 12:
            with torch.no_grad():
                shown = _tensor_str(value)
            return f"{prefix}{shown}"
        return prefix + say("a {word} tensor of shape {shape}", word=str(value.dtype).replace('torch.', ''),
                            shape=tuple(value.shape))
    if isinstance(value, (list, tuple)) and len(value) > 16:
        return prefix + say("a {t} of {n} items starting {start}", t=type(value).__name__, n=len(value),
                            start=list(value[:8]))
    if isinstance(value, torch.nn.Module):
        return prefix + say("a {word} model", word=type(value).__name__)
    if callable(value) and not isinstance(value, (int, float)):
        return f"{prefix}{getattr(value, '__name__', None) or say('a function')}"
    text = repr(value)
    return prefix + (text if len(text) <= 200 else text[:200] + " ...")


def _tensor_str(t: torch.Tensor) -> str:
    t = t.detach().cpu()
    if t.dtype == torch.bool or not t.is_floating_point():
        return f"tensor({t.tolist()})"
    values = [_num(v) for v in t.flatten().tolist()]
    nested = _nest(values, list(t.shape))
    return f"tensor({nested})"


def _num(v: float) -> str:
    if math.isnan(v) or math.isinf(v):
        return str(v)
    text = f"{v:.4g}"
    return text if any(c in text for c in ".en") else text + "."  # 1000. reads as a float, 1000 as an int


def _nest(values: list[str], shape: list[int]) -> str:
    if not shape:
        return values[0]
    if len(shape) == 1:
        return "[" + ", ".join(values) + "]"
    step = len(values) // shape[0] if shape[0] else 0
    return "[" + ", ".join(_nest(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"


def expect_tensor(learner, got, expected: torch.Tensor, *, mistakes: list | tuple = (),
                  nonfinite_hint: str = "", atol: float = ATOL, rtol: float = RTOL, what: str = "") -> None:
    """Raise Mistake unless `got` is a tensor equal to `expected` (same shape, same values up to atol + rtol *
    |expected|, see ATOL and RTOL above; -inf where expected has -inf). `mistakes` is a list of (hint,
    wrong_value): when `got` matches a known wrong answer, the hint names that mistake."""
    context = learner.last_call + (f" ({what})" if what else "")
    expected = expected.detach().cpu()
    if expected.dim() == 0 and isinstance(got, (int, float)) and not isinstance(got, bool):
        got = torch.tensor(float(got))  # a plain Python number is fine for a scalar answer
    if isinstance(got, (tuple, list)):
        raise Mistake(say("{call} returned a {t} of {n} items; expected one tensor of shape {s}.", call=context,
                          t=type(got).__name__, n=len(got), s=tuple(expected.shape)))
    if not isinstance(got, torch.Tensor):
        tip = say(" Use torch operations (or torch.from_numpy) so the result is a torch.Tensor.") \
            if type(got).__module__.startswith("numpy") else ""
        raise Mistake(say("{call} returned {t} ({v}); expected a torch.Tensor of shape {s}.", call=context,
                          t=type(got).__name__, v=describe(got), s=tuple(expected.shape)) + tip)
    got = got.detach().cpu()
    hint = _match_mistake(got, expected, mistakes, atol, rtol)
    if tuple(got.shape) != tuple(expected.shape):
        raise Mistake(say("{call} returned shape {got}; expected shape {expected}.", call=context,
                          got=tuple(got.shape), expected=tuple(expected.shape)) + _hint(hint))
    if expected.dtype == torch.bool and got.dtype != torch.bool:
        raise Mistake(say("{call} returned dtype {d}; expected a boolean tensor (torch.bool, True/False values). "
                          "Compare with `>=`/`<=` or call .bool().", call=context, d=got.dtype) + _hint(hint))
    if expected.is_floating_point() and not got.is_floating_point():
        raise Mistake(say("{call} returned dtype {d}; expected a floating-point tensor. Integer tensors cannot hold "
                          "fractions: convert with .float().", call=context, d=got.dtype))
    if not expected.is_floating_point() and expected.dtype != torch.bool and got.is_floating_point():
        raise Mistake(say("{call} returned dtype {d}; expected integers ({e}).", call=context, d=got.dtype,
                          e=expected.dtype))
    if got.is_floating_point() and expected.is_floating_point():
        bad = torch.isnan(got) | (torch.isinf(got) & ~torch.isinf(expected))
        if bad.any() and not (torch.isnan(expected) | torch.isinf(expected))[bad].all():
            where = tuple(int(i) for i in bad.nonzero()[0])
            # the overflow hint only where exp() could overflow: an input beyond e^88 in float32, at that very
            # index for an input of the answer's shape (a NaN beside small inputs is no overflow)
            overflow = nonfinite_hint if nonfinite_hint and _has_large_values(learner.last_args, where, got.shape) \
                else ""
            nan = say(NAN_HINT) if torch.isnan(got[where]) else say(INF_HINT)
            return _verdict(learner, say("{call} returned {v} at index {i} where {e} was expected.", call=context,
                                         v=got[where].item(), i=where, e=f"{expected[where].item():.6g}")
                            + _hint(overflow or hint or nan))
    if _close(got, expected, atol, rtol).all():
        return _verdict(learner)
    _verdict(learner, say("{call} returned wrong values.", call=context) + "\n" + _difference(got, expected, atol, rtol)
             + _dtype_note(got, expected) + _hint(hint))


def _hint(hint: str) -> str:
    """A hint on a line of its own after the message ("" for none)."""
    return say("\nHint: {hint}", hint=hint) if hint else ""


def _verdict(learner, wrong: str | None = None) -> None:
    """One comparison's outcome: raise Mistake(wrong), or, when the grader counts partial credit, note it
    in learner.tally (None for a right answer) and let the check go on."""
    tally = getattr(learner, "tally", None)
    if tally is None:
        if wrong is not None:
            raise Mistake(wrong)
        return
    tally.append(wrong)


# written in the learner's language where they are used: say(NAN_HINT)
NAN_HINT = ("a NaN (not a number) came out of finite inputs. Look for 0 / 0, inf - inf, 0 * inf, or the square "
            "root or log of a negative number in your code.")
INF_HINT = "an infinite value came out of finite inputs. Look for a division by zero or exp() of a large number."


def _has_large_values(args, where: tuple | None = None, shape=None) -> bool:
    """True when some input could overflow exp() in float32 (|value| > 80): a tensor of `shape` counts
    only at index `where`, any other input anywhere."""
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel():
            if where is not None and tuple(a.shape) == tuple(shape):
                a = a[where]
            finite = a[torch.isfinite(a)]
            if finite.numel() and finite.abs().max() > 80:
                return True
        elif isinstance(a, float) and math.isfinite(a) and abs(a) > 80:
            return True
    return False


def _dtype_note(got: torch.Tensor, expected: torch.Tensor) -> str:
    if got.dtype == expected.dtype:
        return ""
    note = say("\n  Your result has dtype {d}; the expected result is {e}.", d=got.dtype, e=expected.dtype)
    if got.dtype in (torch.bfloat16, torch.float16):
        note += say(" {word} keeps only about {num} significant digits: compute in float32 (call .float() on the "
                    "inputs, or do not convert them).", word=str(got.dtype).replace('torch.', ''),
                    num=3 if got.dtype == torch.bfloat16 else 4)
    return note


def _close(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    if expected.dtype == torch.bool or not expected.is_floating_point():
        return got.to(expected.dtype) == expected
    got, expected = got.double(), expected.double()
    same = (got == expected) | (got.isnan() & expected.isnan())  # -inf == -inf; NaN matches NaN
    finite = torch.isfinite(got) & torch.isfinite(expected)
    near = (got - expected).abs() <= atol + rtol * expected.abs()
    return same | (finite & near)


def _match_mistake(got, expected, mistakes, atol, rtol) -> str:
    for hint, wrong in mistakes:
        if wrong is None:
            continue
        wrong = wrong.detach().cpu() if isinstance(wrong, torch.Tensor) else torch.as_tensor(wrong)
        if tuple(wrong.shape) != tuple(got.shape):
            continue
        if wrong.dtype == torch.bool and got.dtype != torch.bool:
            continue
        try:
            if tuple(wrong.shape) == tuple(expected.shape) and _close(wrong, expected, atol, rtol).all():
                continue  # on this input the mistake gives the right answer: no evidence
            if _close(got, wrong, atol, rtol).all():
                return hint
        except (RuntimeError, TypeError):
            continue
    return ""


def _difference(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str:
    if expected.numel() <= 12:
        return say("\n  expected: {e}\n  got:      {g}", e=_tensor_str(expected), g=_tensor_str(got))[1:]
    wrong = ~_close(got, expected, atol, rtol)
    where = tuple(int(i) for i in wrong.nonzero()[0])
    show = (lambda t: str(t[where].item())) if not expected.is_floating_point() else (lambda t: _num(float(t[where])))
    lines = [say("  {n} of {m} values differ; first at index {i}: expected {e}, got {g}.", n=int(wrong.sum()),
                 m=wrong.numel(), i=where, e=show(expected), g=show(got))]
    if expected.is_floating_point():
        finite = torch.isfinite(expected) & torch.isfinite(got)
        if finite.any():
            diff = (got.double() - expected.double()).abs()[finite].max().item()
            lines.append(say("  largest |difference| {d}.", d=f"{diff:.4g}"))
    return "\n".join(lines)


def expect_equal(learner, got, expected, *, mistakes: list | tuple = (), what: str = "") -> None:
    """Raise Mistake unless `got == expected` for plain Python values (ints, lists, dicts)."""
    context = learner.last_call + (f" ({what})" if what else "")
    if isinstance(got, torch.Tensor) and got.numel() == 1 and isinstance(expected, (int, float)):
        got = got.item()
    if type(expected) is list and isinstance(got, tuple):
        got = list(got)
    if got == expected and (type(got) is type(expected) or isinstance(expected, (int, float))):
        return _verdict(learner)
    hint = next((h for h, wrong in mistakes if wrong != expected and got == wrong), "")
    if type(got) is not type(expected) and not (isinstance(expected, (int, float)) and isinstance(got, (int, float))):
        raise Mistake(say("{call} returned a {t} ({v}); expected a {e}: {w}.", call=context, t=type(got).__name__,
                          v=describe(got), e=type(expected).__name__, w=describe(expected)) + _hint(hint))
    _verdict(learner, say("{call} returned wrong values.", call=context)
             + say("\n  expected: {e}\n  got:      {g}", e=describe(expected), g=describe(got)) + _hint(hint))


def maybe(make):
    """make() or None if it fails: for wrong variants that only exist for some input shapes."""
    try:
        return make()
    except Exception:
        return None
