"""What a check answers, and the exceptions a check raises on the way.

A check ends in one CheckResult: "pass", "fail", "not-attempted" or "error", with a message the
learner can act on. Inside a check, a wrong answer is raised as Mistake (its text is the feedback),
a stub that still raises NotImplementedError as NotAttempted.

>>> r = CheckResult("softmax", "fail", "softmax(x) returned shape (3,); expected shape (2, 3).")
>>> print(r)
[NOT YET] softmax: softmax(x) returned shape (3,); expected shape (2, 3).
>>> r.passed
False
"""
from __future__ import annotations

import html

from llmlab.exercises.language import speaking
from llmlab.exercises.messages import say

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


# A result's status as text (__str__) and as the title of its HTML box, in English: say() writes them in the
# result's language.
LABELS = {"pass": "PASSED", "fail": "NOT YET", "not-attempted": "NOT ATTEMPTED", "error": "ERROR"}
TITLES = {"pass": "Passed", "fail": "Not yet", "not-attempted": "Not attempted", "error": "Error"}


class CheckResult:
    """What `check` answers: `passed` (bool), `status` ("pass", "fail", "not-attempted" or
    "error") and `message` (the feedback text). `bool(result)` is `result.passed`."""

    def __init__(self, exercise: str, status: str, message: str, score: float | None = None):
        self.exercise = exercise
        self.status = status
        self.message = message
        # the share of the exercise's points: 1 for a pass, the fraction of right comparisons for a
        # fail that the grader counted case by case (run_check(partial=True)), 0 otherwise
        self.score = (1.0 if status == "pass" else 0.0) if score is None else float(score)
        self._shown = False  # check() already displayed it: do not show it twice in Jupyter
        self.language = "en"  # the language check() wrote the message in; the labels follow (language.py)

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        with speaking(self.language):
            shown = say(LABELS[self.status]) if self.status in LABELS else self.status
        return f"[{shown}] {self.exercise}: {self.message}"

    def __repr__(self) -> str:
        return f"CheckResult(exercise={self.exercise!r}, status={self.status!r})"

    def to_dict(self) -> dict:
        return {"exercise": self.exercise, "passed": self.passed, "status": self.status, "message": self.message,
                "score": self.score}

    def _repr_html_(self) -> str:
        colour = {"pass": "#2e7d32", "fail": "#c62828", "not-attempted": "#757575"}.get(self.status, "#ef6c00")
        mark = {"pass": "&#10004; ", "fail": "&#10008; ", "not-attempted": "&#8230; "}.get(self.status, "")
        with speaking(self.language):
            title = mark + say(TITLES[self.status if self.status in TITLES else "error"])
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
