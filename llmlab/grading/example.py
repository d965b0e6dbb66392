"""`llmlab example DIR`: the instructor guide's example class, shipped with the package.

    DIR/lesson/attention_lesson.ipynb   a lesson with three solved exercises (softmax, causal_mask,
                                        rms_norm), solution cells tagged "solution"
    DIR/submissions/<student>/...       what four students handed in, a folder each
    DIR/roster.csv                      the class: five students, one of whom handed nothing in

alice handed in the solved lesson, bob the untouched student copy, carol a softmax that always
normalises over the last dimension, whatever `dim` says (right on 4 of its 5 hidden cases: partial
credit), dan a notebook whose causal mask raises. erin, on the roster, handed nothing in.
"""
from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path

import nbformat

from llmlab.grading.assign import student_copy

LESSON = "attention_lesson.ipynb"
ROSTER = ("student,name,email,sis_login_id\n"
          "alice,Alice Archer,alice@example.org,aarcher\n"
          "bob,Bob Baker,bob@example.org,bbaker\n"
          "carol,Carol Cruz,carol@example.org,ccruz\n"
          "dan,Dan Dietz,dan@example.org,ddietz\n"
          "erin,Erin Evans,erin@example.org,eevans\n")
ANSWERS = {
    "carol": {"softmax": "def softmax(x, dim=-1):\n    e = (x - x.max(-1, keepdim=True).values).exp()\n"
                         "    return e / e.sum(-1, keepdim=True)"},
    "dan": {"softmax": "def softmax(x, dim=-1):\n    return x.softmax(dim)",
            "causal_mask": "def causal_mask(T):\n    raise RuntimeError('not finished')"},
}


def lesson_text() -> str:
    """The example lesson, as shipped in llmlab/grading/data."""
    return resources.files("llmlab.grading").joinpath("data", LESSON).read_text(encoding="utf-8")


def write_example(folder, verbose: bool = True) -> Path:
    folder = Path(folder)
    if folder.exists() and any(folder.iterdir()):
        raise ValueError(f"{folder} already exists and is not empty; `llmlab example` writes into a new folder.")
    (folder / "lesson").mkdir(parents=True)
    (folder / "lesson" / LESSON).write_text(lesson_text(), encoding="utf-8")
    solved = nbformat.reads(lesson_text(), as_version=4)
    student, exercises = student_copy(solved)
    handed_in = {"alice": solved, "bob": student}
    for name, answers in ANSWERS.items():
        nb = copy.deepcopy(student)
        stubs = [c for c in nb.cells if "exercise" in c.metadata.get("tags", [])]
        for ex, cell in zip(exercises, stubs):
            cell.source = answers.get(ex, cell.source)
        handed_in[name] = nb
    for name, nb in handed_in.items():
        (folder / "submissions" / name).mkdir(parents=True)
        nbformat.write(nb, folder / "submissions" / name / LESSON)
    (folder / "roster.csv").write_text(ROSTER, encoding="utf-8")
    if verbose:
        print(f"wrote {folder / 'lesson' / LESSON} (exercises: {', '.join(exercises)}), "
              f"{len(handed_in)} submissions in {folder / 'submissions'}/ and {folder / 'roster.csv'}")
    return folder
