"""The check mechanism: run a learner's function safely and turn every problem into feedback.

A check never crashes on broken learner code. An exception, a wrong type or shape, a NaN or a
loop that never ends all become a message that says which input was used, what was expected,
what came back and, where we recognise it, which common mistake produced it.

This module calls the learner's function (Learner: copies of the inputs, a time limit, exceptions
turned into Mistake) and draws the hidden cases (generator). What a check answers is in
results.py, how an answer is compared with the expected one in compare.py (which needs nothing
from here: imports run results <- compare <- core <- checks).

>>> from llmlab.exercises import check
>>> def softmax(x, dim=-1):
...     e = (x - x.max(dim, keepdim=True).values).exp()
...     return e / e.sum(dim, keepdim=True)
>>> check("softmax", softmax).passed          # doctest: +SKIP
True
"""
from __future__ import annotations

import ctypes
import os
import signal
import threading
import traceback

import torch

from llmlab.exercises.compare import describe
from llmlab.exercises.messages import say
from llmlab.exercises.results import DEFAULT_TIME_LIMIT, Mistake, NotAttempted, _TimeUp

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


def _learner_line(tb) -> str:
    """The last traceback line that is in the learner's code (not in llmlab or torch)."""
    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(tb)
              if not os.path.abspath(f.filename).startswith(here) and "site-packages" not in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    code = f": `{f.line.strip()}`" if f.line else ""
    return say(" (in {f}, line {num}{code})", f=f.name, num=f.lineno, code=code)


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
        self.tally: list | None = None  # partial credit: one entry per comparison, None = right (run_check)

    def __call__(self, *args, names: tuple[str, ...] = ()):
        shown = [describe(a, n) for a, n in zip(args, list(names) + [None] * len(args))]
        self.last_call = f"{self.name}({', '.join(shown)})"
        self.last_args = args
        try:
            return self.invoke(args)
        except NotImplementedError:
            raise NotAttempted() from None
        except _TimeUp:
            raise Mistake(say("{call} did not return within {s} s. Look for a loop that never ends (a `while` "
                              "whose condition never becomes false, or an index that is never advanced).",
                              call=self.last_call, s=f"{self.time_limit:g}")) from None
        except Exception as e:
            hint = next((h for text, h in self.error_hints if text in str(e)), "")
            hint = say("\nHint: {hint}", hint=hint) if hint else _exception_hint(e)
            line = getattr(e, "learner_line", None)
            line = _learner_line(e.__traceback__) if line is None else line
            raise Mistake(say("{call} raised {t}: {rest}", call=self.last_call, t=type(e).__name__, rest=e)
                          + line + hint) from None

    def invoke(self, args: tuple):
        """Call the function on copies of args: an in-place edit (x -= x.max()) must not change our inputs."""
        copies = tuple(a.clone() if isinstance(a, torch.Tensor) else
                       list(a) if isinstance(a, list) else a for a in args)
        return call_with_time_limit(self.fn, copies, self.time_limit)


def _exception_hint(e: Exception) -> str:
    text = str(e)
    if "must match the size" in text or "shapes cannot be multiplied" in text or "size of tensor" in text:
        return say("\nHint: {hint}", hint=say("two tensors with incompatible shapes met. Print the shape of each "
                                              "intermediate (x.shape) and compare with the shapes in the exercise text."))
    if isinstance(e, TypeError) and "argument" in text:
        return say("\nHint: {hint}", hint=say("check that your function takes the arguments in the order given "
                                              "in the exercise."))
    if isinstance(e, NameError):
        return say("\nHint: {hint}", hint=say("a name is used before it is defined (did you run the cell that "
                                              "defines it?)."))
    return ""


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
