"""Automatically checked coding exercises.

In a chapter, the learner writes a function and runs

>>> from llmlab.exercises import check
>>> check("softmax", my_softmax)          # doctest: +SKIP
[PASSED] softmax: matches llmlab.attention.softmax on 5 hidden cases, ...

`check` calls the function on hidden cases, compares with llmlab's own implementation, shows the
result (HTML in Jupyter, text elsewhere) and returns a CheckResult (`.passed`, `.status`,
`.message`). It never raises because of the learner's code. The exercise list is in registry.py.

The instructor's side (`llmlab assign`, `llmlab grade`) is the package llmlab.grading, which builds
on this one (nothing here imports from it). Under `llmlab grade`, check() also hands the function to
the grader (SUBMITTED), which runs the same checks itself, counting partial credit
(run_check(..., partial=True)).
"""
from __future__ import annotations

import os

from llmlab.exercises.core import Learner
from llmlab.exercises.language import current_language, set_language, speaking
from llmlab.exercises.registry import BY_ID, EXERCISES, Exercise, list_exercises
from llmlab.exercises.results import DEFAULT_TIME_LIMIT, CheckResult, Mistake, NotAttempted, show
from llmlab.exercises.messages import say

__all__ = ["check", "CheckResult", "EXERCISES", "Exercise", "list_exercises", "set_language"]

SUBMITTED: dict = {}  # exercise id -> the function passed to check(), filled only in a kernel that `llmlab grade` runs


def check(exercise: str, fn, *, time_limit: float = DEFAULT_TIME_LIMIT, quiet: bool = False) -> CheckResult:
    """Check the learner's function `fn` for `exercise` (an id such as "softmax"; see EXERCISES).

    The feedback is in English, or in Chinese after set_language("zh_CN") (or with the environment
    variable LLMLAB_LANGUAGE=zh_CN). Each call of `fn` may take at most `time_limit` seconds. quiet=True skips the display. In a
    notebook that `llmlab grade` runs, `fn` is also recorded for the grader (the result shown here
    is only feedback: the grade comes from the grader's own run of the check).

    How a student copy behaves: the stub from `llmlab assign` raises NotImplementedError, which
    check reports as "not attempted" instead of raising, so a notebook still runs top to bottom.
    """
    if os.environ.get("LLMLAB_GRADING") == "1" and callable(fn):
        SUBMITTED[str(exercise)] = fn
    language = current_language()  # set_language() or LLMLAB_LANGUAGE; a bad value raises before the check runs
    with speaking(language):  # every message piece is written in this language (messages.say)
        result = _run(exercise, fn, time_limit)
    result.language = language
    if not quiet:
        show(result)
    return result


def _run(exercise: str, fn, time_limit: float) -> CheckResult:
    if exercise not in BY_ID:
        known = ", ".join(sorted(BY_ID))
        return CheckResult(str(exercise), "error", say("There is no exercise {x}. Known ids: {known}.",
                                                       x=repr(exercise), known=known))
    ex = BY_ID[exercise]
    if not callable(fn):
        return CheckResult(exercise, "fail", say("check({x}, ...) needs your function itself, e.g. check({y}, {name}), "
                                                 "but got {t}. Pass the function's name without calling it (no "
                                                 "parentheses).", x=repr(exercise), y=repr(exercise),
                                                 name=ex.signature.split('(')[0], t=type(fn).__name__))
    return run_check(exercise, Learner(fn, getattr(fn, "__name__", say("your function")), time_limit))


def run_check(exercise: str, learner: Learner, partial: bool = False) -> CheckResult:
    """Run the check of a known exercise id on `learner` (a Learner, or the grader's RemoteLearner).

    partial=True (the grader) gives partial credit: a comparison that finds a wrong answer is noted
    and the check goes on with its next case; the result's `score` is the fraction of comparisons
    that were right, and its message is the one the first wrong answer gives. Anything else that
    stops the check (an exception, a time-out, an answer of the wrong kind) scores 0.
    """
    ex = BY_ID[exercise]
    learner.tally = [] if partial else None
    first_wrong = lambda: next((m for m in learner.tally or [] if m is not None), None)  # noqa: E731
    try:
        note = ex.check(learner)
        if first_wrong() is not None:
            right = learner.tally.count(None)
            return CheckResult(exercise, "fail", first_wrong() + say("\n({right} of {n} comparisons right)", right=right,
                                                                     n=len(learner.tally)), score=right / len(learner.tally))
    except NotAttempted:
        return CheckResult(exercise, "not-attempted", say("not attempted yet: the function still raises "
                           "NotImplementedError. Replace the `raise NotImplementedError(...)` line with your "
                           "code and run the cell again."))
    except Mistake as m:
        return CheckResult(exercise, "fail", first_wrong() or str(m))
    except Exception as e:  # never let a checker problem crash the learner's notebook
        if first_wrong() is not None:  # the check tripped over a wrong answer it had already noted
            return CheckResult(exercise, "fail", first_wrong())
        return CheckResult(exercise, "error", say("the checker could not evaluate the answer ({t}: {e}). If your "
                                                  "function returns something unusual, return a torch.Tensor as the "
                                                  "exercise asks; otherwise please report this.",
                                                  t=type(e).__name__, e=e))
    return CheckResult(exercise, "pass", say("well done: {note}", note=note))
