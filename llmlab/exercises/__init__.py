"""Automatically checked coding exercises.

In a chapter, the learner writes a function and runs

>>> from llmlab.exercises import check
>>> check("softmax", my_softmax)          # doctest: +SKIP
[PASSED] softmax: matches llmlab.attention.softmax on 5 hidden cases, ...

`check` calls the function on hidden cases, compares with llmlab's own implementation, shows the
result (HTML in Jupyter, text elsewhere) and returns a CheckResult (`.passed`, `.status`,
`.message`). It never raises because of the learner's code. The exercise list is in registry.py;
`llmlab assign` and `llmlab grade` (llmlab/cli.py) build on these checks. Under `llmlab grade`,
check() also hands the function to the grader, which runs the same checks itself (grading.py).
"""
from __future__ import annotations

from llmlab.exercises.core import DEFAULT_TIME_LIMIT, CheckResult, Learner, Mistake, NotAttempted, show
from llmlab.exercises.registry import BY_ID, EXERCISES, Exercise, list_exercises
from llmlab.exercises.wire import record

__all__ = ["check", "CheckResult", "EXERCISES", "Exercise", "list_exercises"]


def check(exercise: str, fn, *, time_limit: float = DEFAULT_TIME_LIMIT, quiet: bool = False) -> CheckResult:
    """Check the learner's function `fn` for `exercise` (an id such as "softmax"; see EXERCISES).

    Each call of `fn` may take at most `time_limit` seconds. quiet=True skips the display. In a
    notebook that `llmlab grade` runs, `fn` is also recorded for the grader (the result shown here
    is only feedback: the grade comes from the grader's own run of the check).

    How a student copy behaves: the stub from `llmlab assign` raises NotImplementedError, which
    check reports as "not attempted" instead of raising, so a notebook still runs top to bottom.
    """
    record(exercise, fn)
    result = _run(exercise, fn, time_limit)
    if not quiet:
        show(result)
    return result


def _run(exercise: str, fn, time_limit: float) -> CheckResult:
    if exercise not in BY_ID:
        known = ", ".join(sorted(BY_ID))
        return CheckResult(str(exercise), "error", f"There is no exercise {exercise!r}. Known ids: {known}.")
    ex = BY_ID[exercise]
    if not callable(fn):
        return CheckResult(exercise, "fail", f"check({exercise!r}, ...) needs your function itself, e.g. "
                           f"check({exercise!r}, {ex.signature.split('(')[0]}), but got {type(fn).__name__}. "
                           "Pass the function's name without calling it (no parentheses).")
    return run_check(exercise, Learner(fn, getattr(fn, "__name__", "your function"), time_limit))


def run_check(exercise: str, learner: Learner) -> CheckResult:
    """Run the check of a known exercise id on `learner` (a Learner, or the grader's RemoteLearner)."""
    ex = BY_ID[exercise]
    try:
        note = ex.check(learner)
    except NotAttempted:
        return CheckResult(exercise, "not-attempted", "not attempted yet: the function still raises "
                           "NotImplementedError. Replace the `raise NotImplementedError(...)` line with your "
                           "code and run the cell again.")
    except Mistake as m:
        return CheckResult(exercise, "fail", str(m))
    except Exception as e:  # never let a checker problem crash the learner's notebook
        return CheckResult(exercise, "error", f"the checker could not evaluate the answer ({type(e).__name__}: "
                           f"{e}). If your function returns something unusual, return a torch.Tensor as the "
                           "exercise asks; otherwise please report this.")
    return CheckResult(exercise, "pass", f"well done: {note}")
