"""The check mechanism: run a learner's function safely and turn every problem into feedback.

A check never crashes on broken learner code. An exception, a wrong type or shape, a NaN or a
loop that never ends all become a message that says which input was used, what was expected,
what came back and, where we recognise it, which common mistake produced it.

>>> from llmlab.exercises import check
>>> def softmax(x, dim=-1):
...     e = (x - x.max(dim, keepdim=True).values).exp()
...     return e / e.sum(dim, keepdim=True)
>>> check("softmax", softmax).passed          # doctest: +SKIP
True
"""
from __future__ import annotations

import ctypes
import html
import math
import os
import signal
import threading
import traceback

import torch

DEFAULT_TIME_LIMIT = 10.0  # seconds for one call of the learner's function


class Mistake(Exception):
    """Raised inside a check when the learner's answer is wrong; the text is the feedback."""


class NotAttempted(Exception):
    """The learner's function still raises NotImplementedError (the stub from `llmlab assign`)."""


class _TimeUp(BaseException):
    """Raised into learner code when its time is up. A BaseException, so `except Exception` in a
    learner's loop cannot swallow it."""


# ----------------------------------------------------------------------------------------------
# The result a check returns (and shows)


class CheckResult:
    """What `check` answers: `passed` (bool), `status` ("pass", "fail", "not-attempted" or
    "error") and `message` (the feedback text). `bool(result)` is `result.passed`."""

    def __init__(self, exercise: str, status: str, message: str):
        self.exercise = exercise
        self.status = status
        self.message = message
        self._shown = False  # check() already displayed it: do not show it twice in Jupyter

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        label = {"pass": "PASSED", "fail": "NOT YET", "not-attempted": "NOT ATTEMPTED", "error": "ERROR"}
        return f"[{label.get(self.status, self.status)}] {self.exercise}: {self.message}"

    def __repr__(self) -> str:
        return f"CheckResult(exercise={self.exercise!r}, status={self.status!r})"

    def to_dict(self) -> dict:
        return {"exercise": self.exercise, "passed": self.passed, "status": self.status, "message": self.message}

    def _repr_html_(self) -> str:
        colour = {"pass": "#2e7d32", "fail": "#c62828", "not-attempted": "#757575"}.get(self.status, "#ef6c00")
        title = {"pass": "&#10004; Passed", "fail": "&#10008; Not yet",
                 "not-attempted": "&#8230; Not attempted"}.get(self.status, "Error")
        return (f'<div style="border-left:6px solid {colour};padding:6px 10px;margin:4px 0;'
                f'background:rgba(127,127,127,0.06)"><b style="color:{colour}">{title}</b> '
                f'<code>{html.escape(self.exercise)}</code>'
                f'<pre style="white-space:pre-wrap;margin:4px 0 0 0">{html.escape(self.message)}</pre></div>')

    def _ipython_display_(self):
        # check() shows the result itself; a cell that ends with check(...) should not show it again.
        if not self._shown:
            from IPython.display import HTML, display
            display(HTML(self._repr_html_()))
            self._shown = True


def in_notebook() -> bool:
    """True inside a Jupyter (or Colab) kernel, where results are shown as HTML."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def show(result: CheckResult) -> None:
    """HTML in a notebook, plain text elsewhere."""
    if in_notebook():
        from IPython.display import HTML, display
        display(HTML(result._repr_html_()))
    else:
        print(result)
    result._shown = True


# ----------------------------------------------------------------------------------------------
# Calling learner code under a time limit


def _can_use_alarm() -> bool:
    # SIGALRM exists on Linux/macOS and may only be handled in the main thread. A Jupyter kernel
    # (ipykernel, Colab) runs cells in the main thread, so this is the usual path there too.
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def call_with_time_limit(fn, args: tuple, seconds: float):
    """Call fn(*args); raise _TimeUp if it has not returned after `seconds`.

    Main thread: a SIGALRM timer raises _TimeUp inside the running Python code (re-armed every
    0.5 s in case the learner's code catches it). Elsewhere: the call runs in a helper thread and,
    when time is up, _TimeUp is injected into that thread (this stops pure-Python loops).
    """
    if _can_use_alarm():
        def on_alarm(signum, frame):
            raise _TimeUp()

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)
        try:
            return fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    box = {}

    def target():
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # handed to the calling thread below
            box["error"] = e

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(_TimeUp))
        worker.join(1.0)
        raise _TimeUp()
    if "error" in box:
        raise box["error"]
    return box.get("value")


# ----------------------------------------------------------------------------------------------
# Describing inputs and outputs in messages


def describe(value, name: str | None = None) -> str:
    """A short readable description: small tensors are printed, big ones by shape and dtype."""
    prefix = f"{name} = " if name else ""
    if isinstance(value, torch.Tensor):
        if value.numel() == 0:
            return f"{prefix}an empty tensor of shape {tuple(value.shape)}"
        if value.numel() <= 12:
            with torch.no_grad():
                shown = _tensor_str(value)
            return f"{prefix}{shown}"
        return f"{prefix}a {str(value.dtype).replace('torch.', '')} tensor of shape {tuple(value.shape)}"
    if isinstance(value, (list, tuple)) and len(value) > 16:
        return f"{prefix}a {type(value).__name__} of {len(value)} items starting {list(value[:8])}"
    if callable(value) and not isinstance(value, (int, float)):
        return f"{prefix}{getattr(value, '__name__', 'a function')}"
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


def _learner_line(tb) -> str:
    """The last traceback line that is in the learner's code (not in llmlab or torch)."""
    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(tb)
              if not os.path.abspath(f.filename).startswith(here) and "site-packages" not in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    code = f": `{f.line.strip()}`" if f.line else ""
    return f" (in {f.name}, line {f.lineno}{code})"


class Learner:
    """Wraps the learner's function. Calling it runs the function under a time limit, on copies of
    the inputs, and turns exceptions into Mistake / NotAttempted with the input in the message."""

    def __init__(self, fn, name: str, time_limit: float = DEFAULT_TIME_LIMIT):
        self.fn = fn
        self.name = name
        self.time_limit = time_limit
        self.last_call = ""
        self.last_args: tuple = ()
        self.error_hints: list[tuple[str, str]] = []  # (text in the error message, hint) set by a check

    def __call__(self, *args, names: tuple[str, ...] = ()):
        shown = [describe(a, n) for a, n in zip(args, list(names) + [None] * len(args))]
        self.last_call = f"{self.name}({', '.join(shown)})"
        self.last_args = args
        try:
            return self.invoke(args)
        except NotImplementedError:
            raise NotAttempted() from None
        except _TimeUp:
            raise Mistake(f"{self.last_call} did not return within {self.time_limit:g} s. Look for a loop "
                          "that never ends (a `while` whose condition never becomes false, or an index "
                          "that is never advanced).") from None
        except Exception as e:
            hint = next((h for text, h in self.error_hints if text in str(e)), "")
            hint = f"\nHint: {hint}" if hint else _exception_hint(e)
            line = getattr(e, "learner_line", None)
            line = _learner_line(e.__traceback__) if line is None else line
            raise Mistake(f"{self.last_call} raised {type(e).__name__}: {e}{line}{hint}") from None

    def invoke(self, args: tuple):
        """Call the function on copies of args: an in-place edit (x -= x.max()) must not change our inputs."""
        copies = tuple(a.clone() if isinstance(a, torch.Tensor) else
                       list(a) if isinstance(a, list) else a for a in args)
        return call_with_time_limit(self.fn, copies, self.time_limit)


def _exception_hint(e: Exception) -> str:
    text = str(e)
    if "must match the size" in text or "shapes cannot be multiplied" in text or "size of tensor" in text:
        return ("\nHint: two tensors with incompatible shapes met. Print the shape of each "
                "intermediate (x.shape) and compare with the shapes in the exercise text.")
    if isinstance(e, TypeError) and "argument" in text:
        return "\nHint: check that your function takes the arguments in the order given in the exercise."
    if isinstance(e, NameError):
        return "\nHint: a name is used before it is defined (did you run the cell that defines it?)."
    return ""


# ----------------------------------------------------------------------------------------------
# Comparing what came back with what was expected


def expect_tensor(learner: Learner, got, expected: torch.Tensor, *, mistakes: list | tuple = (),
                  nonfinite_hint: str = "", atol: float = 1e-5, rtol: float = 1e-4, what: str = "") -> None:
    """Raise Mistake unless `got` is a tensor equal to `expected` (same shape, same values, -inf
    where expected has -inf). `mistakes` is a list of (hint, wrong_value): when `got` matches a
    known wrong answer, the hint names that mistake."""
    context = learner.last_call + (f" ({what})" if what else "")
    expected = expected.detach().cpu()
    if expected.dim() == 0 and isinstance(got, (int, float)) and not isinstance(got, bool):
        got = torch.tensor(float(got))  # a plain Python number is fine for a scalar answer
    if isinstance(got, (tuple, list)):
        raise Mistake(f"{context} returned a {type(got).__name__} of {len(got)} items; expected one tensor "
                      f"of shape {tuple(expected.shape)}.")
    if not isinstance(got, torch.Tensor):
        tip = " Use torch operations (or torch.from_numpy) so the result is a torch.Tensor." \
            if type(got).__module__.startswith("numpy") else ""
        raise Mistake(f"{context} returned {type(got).__name__} ({describe(got)}); expected a torch.Tensor of "
                      f"shape {tuple(expected.shape)}.{tip}")
    got = got.detach().cpu()
    hint = _match_mistake(got, expected, mistakes, atol, rtol)
    if tuple(got.shape) != tuple(expected.shape):
        raise Mistake(f"{context} returned shape {tuple(got.shape)}; expected shape {tuple(expected.shape)}."
                      + (f"\nHint: {hint}" if hint else ""))
    if expected.dtype == torch.bool and got.dtype != torch.bool:
        raise Mistake(f"{context} returned dtype {got.dtype}; expected a boolean tensor (torch.bool, "
                      "True/False values). Compare with `>=`/`<=` or call .bool()."
                      + (f"\nHint: {hint}" if hint else ""))
    if expected.is_floating_point() and not got.is_floating_point():
        raise Mistake(f"{context} returned dtype {got.dtype}; expected a floating-point tensor. "
                      "Integer tensors cannot hold fractions: convert with .float().")
    if not expected.is_floating_point() and expected.dtype != torch.bool and got.is_floating_point():
        raise Mistake(f"{context} returned dtype {got.dtype}; expected integers ({expected.dtype}).")
    if got.is_floating_point() and expected.is_floating_point():
        bad = torch.isnan(got) | (torch.isinf(got) & ~torch.isinf(expected))
        if bad.any() and not (torch.isnan(expected) | torch.isinf(expected))[bad].all():
            where = tuple(int(i) for i in bad.nonzero()[0])
            # the overflow hint only where exp() could overflow: some input is beyond e^88 in float32
            overflow = nonfinite_hint if nonfinite_hint and _has_large_values(learner.last_args) else ""
            nan = NAN_HINT if torch.isnan(got[where]) else INF_HINT
            raise Mistake(f"{context} returned {got[where].item()} at index {where} where {expected[where].item():.6g} "
                          f"was expected.\nHint: {overflow or hint or nan}")
    if _close(got, expected, atol, rtol).all():
        return
    raise Mistake(f"{context} returned wrong values.\n{_difference(got, expected, atol, rtol)}"
                  + _dtype_note(got, expected) + (f"\nHint: {hint}" if hint else ""))


NAN_HINT = ("a NaN (not a number) came out of finite inputs. Look for 0 / 0, inf - inf, 0 * inf, or the square "
            "root or log of a negative number in your code.")
INF_HINT = "an infinite value came out of finite inputs. Look for a division by zero or exp() of a large number."


def _has_large_values(args) -> bool:
    """True when some input could overflow exp() in float32 (|value| > 80)."""
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel():
            finite = a[torch.isfinite(a)]
            if finite.numel() and finite.abs().max() > 80:
                return True
        elif isinstance(a, float) and math.isfinite(a) and abs(a) > 80:
            return True
    return False


def _dtype_note(got: torch.Tensor, expected: torch.Tensor) -> str:
    if got.dtype == expected.dtype:
        return ""
    note = f"\n  Your result has dtype {got.dtype}; the expected result is {expected.dtype}."
    if got.dtype in (torch.bfloat16, torch.float16):
        note += (f" {str(got.dtype).replace('torch.', '')} keeps only about {3 if got.dtype == torch.bfloat16 else 4} "
                 "significant digits: compute in float32 (call .float() on the inputs, or do not convert them).")
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
        return f"  expected: {_tensor_str(expected)}\n  got:      {_tensor_str(got)}"
    wrong = ~_close(got, expected, atol, rtol)
    where = tuple(int(i) for i in wrong.nonzero()[0])
    show = (lambda t: str(t[where].item())) if not expected.is_floating_point() else (lambda t: _num(float(t[where])))
    lines = [f"  {int(wrong.sum())} of {wrong.numel()} values differ; first at index {where}: "
             f"expected {show(expected)}, got {show(got)}."]
    if expected.is_floating_point():
        finite = torch.isfinite(expected) & torch.isfinite(got)
        if finite.any():
            diff = (got.double() - expected.double()).abs()[finite].max().item()
            lines.append(f"  largest |difference| {diff:.4g}.")
    return "\n".join(lines)


def expect_equal(learner: Learner, got, expected, *, mistakes: list | tuple = (), what: str = "") -> None:
    """Raise Mistake unless `got == expected` for plain Python values (ints, lists, dicts)."""
    context = learner.last_call + (f" ({what})" if what else "")
    if isinstance(got, torch.Tensor) and got.numel() == 1 and isinstance(expected, (int, float)):
        got = got.item()
    if type(expected) is list and isinstance(got, tuple):
        got = list(got)
    if got == expected and (type(got) is type(expected) or isinstance(expected, (int, float))):
        return
    hint = next((h for h, wrong in mistakes if wrong != expected and got == wrong), "")
    if type(got) is not type(expected) and not (isinstance(expected, (int, float)) and isinstance(got, (int, float))):
        raise Mistake(f"{context} returned a {type(got).__name__} ({describe(got)}); expected a "
                      f"{type(expected).__name__}: {describe(expected)}." + (f"\nHint: {hint}" if hint else ""))
    raise Mistake(f"{context} returned wrong values.\n  expected: {describe(expected)}\n  got:      {describe(got)}"
                  + (f"\nHint: {hint}" if hint else ""))


def maybe(make):
    """make() or None if it fails: for wrong variants that only exist for some input shapes."""
    try:
        return make()
    except Exception:
        return None


_SALT = 0  # 0 for learners; `llmlab grade` sets a secret one in its own process (set_hidden_salt)


def generator(seed: int) -> torch.Generator:
    """A private random generator: hidden cases are the same every run, and the learner's own
    torch.manual_seed() calls neither change them nor are changed by them. The grader draws its
    own cases (a secret salt on every seed), so answers copied for the cases a learner can read in
    the checks' source do not pass there."""
    return torch.Generator().manual_seed(seed + _SALT)


def set_hidden_salt(salt: int) -> None:
    global _SALT
    _SALT = int(salt)
