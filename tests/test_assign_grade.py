"""`llmlab assign` and `llmlab grade`: student copies carry no solution code and still run; grading
turns every kind of submission (solved, empty, raising, looping, not JSON) into the right rows."""
from __future__ import annotations

import ast
import copy
import csv
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from llmlab.cli import main
from llmlab.exercises.assign import check_ids, is_solution, stub_source, student_copy
from llmlab.exercises.grading import execute_notebook, rows_for

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "exercises"
LESSON = FIXTURES / "attention_lesson.ipynb"
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
SOURCES = sorted(FIXTURES.glob("*.ipynb")) + CHAPTERS   # the fixtures are always there


def digest(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def solution_lines(nb) -> set[str]:
    """Every statement line inside the bodies of the solution cells' functions (docstrings excluded)."""
    lines = set()
    for cell in nb.cells:
        if cell.cell_type != "code" or not is_solution(cell):
            continue
        source = cell.source.splitlines()
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body[1:] if isinstance(node.body[0], ast.Expr) and isinstance(
                    getattr(node.body[0], "value", None), ast.Constant) else node.body
                for stmt in body:
                    for text in source[stmt.lineno - 1:stmt.end_lineno]:
                        text = text.strip()
                        if text and not text.startswith("#"):
                            lines.add(text)
                    lines.add(ast.unparse(stmt).splitlines()[0])
    return lines


def assert_no_solution_code(source_nb, student_nb, cells="all"):
    secret = solution_lines(source_nb)
    for cell in student_nb.cells:
        assert "solution" not in cell.metadata.get("tags", [])
        if cell.cell_type == "markdown":
            assert "{solution" not in cell.source
            continue
        assert cell.outputs == [] and cell.execution_count is None
        if cells == "stubs" and "exercise" not in cell.metadata.get("tags", []):
            continue
        seen = {line.strip() for line in cell.source.splitlines()}
        leaked = secret & seen
        assert not leaked, f"solution code in the student copy: {leaked}"
        ast.parse(cell.source) if not cell.source.lstrip().startswith(("%", "!")) else None


# ------------------------------------------------------------------------------------------ assign


def test_assign_fixture_makes_a_clean_student_copy(tmp_path, capsys):
    before = digest(FIXTURES)
    assert main(["assign", str(LESSON), "--out", str(tmp_path / "student")]) == 0
    assert digest(FIXTURES) == before, "assign must not touch its sources"
    assert "3 solution cells stubbed" in capsys.readouterr().out

    source = nbformat.read(LESSON, as_version=4)
    student = nbformat.read(tmp_path / "student" / LESSON.name, as_version=4)
    nbformat.validate(student)
    assert_no_solution_code(source, student)
    assert student.metadata["llmlab"]["exercises"] == ["softmax", "causal_mask", "rms_norm"]
    # check cells and ordinary cells are kept verbatim, in order
    kept = [c.source for c in source.cells if c.cell_type == "code" and not is_solution(c)]
    assert kept == [c.source for c in student.cells if c.cell_type == "code" and "exercise" not in c.metadata.get("tags", [])]
    stubs = [c.source for c in student.cells if "exercise" in c.metadata.get("tags", [])]
    assert len(stubs) == 3
    assert 'def softmax(x, dim=-1):\n    """exp(x) / sum(exp(x)) along dim.' in stubs[0]   # signature + docstring kept
    assert 'raise NotImplementedError("Exercise softmax: write your solution here")' in stubs[0]
    assert "Exercise causal_mask" in stubs[1]
    assert stubs[2].startswith("EPS_DEFAULT = 1e-6")   # the constant its signature needs stays
    assert "Subtract the maximum" not in json.dumps(student)  # the markdown {solution} block is gone


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_assign_on_fixtures_and_chapters_leaves_no_solution_code(path, tmp_path):
    assert main(["assign", str(path), "--out", str(tmp_path)]) == 0
    source = nbformat.read(path, as_version=4)
    student = nbformat.read(tmp_path / path.name, as_version=4)
    # chapters may repeat a helper line elsewhere on purpose, so for them only the stub cells are scanned
    assert_no_solution_code(source, student, cells="all" if path.parent == FIXTURES else "stubs")
    assert sum(is_solution(c) for c in source.cells if c.cell_type == "code") == \
        sum("exercise" in c.metadata.get("tags", []) for c in student.cells)


def test_stub_source_keeps_signatures_and_drops_bodies():
    src = (
        "import torch\nimport math\n\nSCALE = 3.0\nHIDDEN = torch.ones(2) * 7\n\n"
        "@torch.no_grad()\ndef f(x: torch.Tensor,\n      scale: float = SCALE) -> torch.Tensor:  # the signature\n"
        '    """Scale x.\n\n    >>> f(torch.ones(1))\n    """\n    # secret comment\n    return x * scale * 12345\n\n'
        "def one_liner(x): return x + 424242\n\n"
        'class Cache:\n    """A cache."""\n    secret_size = 99\n\n    def __init__(self):\n        self.k = [31337]\n\n'
        "    def add(self, k):\n        self.k.append(k * 777)\n\nprint(f(torch.ones(2)))\n"
    )
    out = stub_source(src, "demo")
    for secret in ["12345", "424242", "secret", "31337", "777", "HIDDEN", "print("]:
        assert secret not in out, secret
    assert "import torch\nimport math" in out and "SCALE = 3.0" in out
    assert "@torch.no_grad()\ndef f(x: torch.Tensor,\n      scale: float = SCALE) -> torch.Tensor:" in out
    namespace = {}
    exec(compile(out, "<stub>", "exec"), namespace)
    for call in (lambda: namespace["f"](1), lambda: namespace["one_liner"](1), lambda: namespace["Cache"]()):
        with pytest.raises(NotImplementedError, match="Exercise demo: write your solution here"):
            call()
    assert namespace["Cache"].__doc__ == "A cache." and namespace["f"].__doc__.startswith("Scale x.")
    # IPython magics and plain statements become a comment-only stub
    assert stub_source("%time y = 2 * 21\n", "t").startswith("# Exercise t")
    assert stub_source("answer = 6 * 7\n", "t") == "# Exercise t: write your solution here"


def test_student_copy_handles_markdown_solutions_and_the_exercise_id():
    nb = nbformat.v4.new_notebook()
    md = nbformat.v4.new_markdown_cell("Answer: 42")
    md.metadata["tags"] = ["solution"]
    sol = nbformat.v4.new_code_cell("def helper(x):\n    return x * 99")
    sol.metadata["tags"] = ["solution", "hide-input"]
    nb.cells = [
        nbformat.v4.new_markdown_cell("Q?\n\n````{solution} q1\n```python\nsecret_code()\n```\n````\nafter"),
        nbformat.v4.new_markdown_cell("```{solution-start} q2\n```\nsecret prose"),
        nbformat.v4.new_markdown_cell("more secret prose"),
        nbformat.v4.new_markdown_cell("```{solution-end}\n```"),
        md, sol, nbformat.v4.new_code_cell("check('top_p', helper)"),
    ]
    student, ids = student_copy(nb)
    text = "\n".join(cell.source for cell in student.cells)   # sources only: random cell ids may hold "42"
    assert ids == ["top_p"]
    assert "secret" not in text and "42" not in text and "x * 99" not in text
    assert "after" in text and "Exercise top_p" in text
    assert student.cells[-2].metadata["tags"] == ["hide-input", "exercise"]
    assert nb.cells[-2].source == "def helper(x):\n    return x * 99", "the source notebook object is not modified"


def test_assign_reports_bad_arguments(tmp_path, capsys):
    assert main(["assign", str(tmp_path / "missing.ipynb"), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["assign", str(LESSON), "--out", str(FIXTURES)]) == 2   # would overwrite the source


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in SOURCES if any(is_solution(c) for c in nbformat.read(p, as_version=4).cells)],
                         ids=lambda p: p.name)
def test_student_copy_executes_up_to_the_first_unsolved_exercise(path, tmp_path):
    """Run a student copy up to (and including) the check of its first stubbed exercise."""
    student, _ = student_copy(nbformat.read(path, as_version=4))
    first_stub = next(i for i, c in enumerate(student.cells) if "exercise" in c.metadata.get("tags", []))
    first_check = next(i for i, c in enumerate(student.cells) if i > first_stub and c.cell_type == "code"
                       and check_ids(c.source))
    student.cells = student.cells[:first_check + 1]
    target = tmp_path / path.name
    nbformat.write(student, target)
    info = execute_notebook(target, timeout=300)
    assert info["status"] == "ok", info["detail"]
    stub_cells = {i for i, c in enumerate(student.cells) if "exercise" in c.metadata.get("tags", [])}
    assert info["cell_errors"] == {}, (
        f"cells raised before the first exercise's check ran: {info['cell_errors']} "
        f"({'a stub cell' if stub_cells & set(info['cell_errors']) else 'cells the chapter itself owns, not stubs'})")
    assert info["reports"] and info["reports"][-1]["status"] == "not-attempted"


# ------------------------------------------------------------------------------------------ grade


def make_submissions(folder: Path, assigned: Path) -> None:
    """alice: full solution; bob: the empty student copy; carol: a wrong softmax, a cell that raises,
    a deleted check cell; dan: a cell that loops forever; erin, frank: not notebooks."""
    folder.mkdir()
    solved = nbformat.read(LESSON, as_version=4)
    student = nbformat.read(assigned, as_version=4)
    nbformat.write(solved, folder / "alice.ipynb")
    nbformat.write(student, folder / "bob.ipynb")

    carol = copy.deepcopy(student)
    stubs = [i for i, c in enumerate(carol.cells) if "exercise" in c.metadata.get("tags", [])]
    carol.cells[stubs[0]].source = ("def softmax(x, dim=-1):\n    e = x.exp()\n    return e / e.sum(dim, keepdim=True)")
    carol.cells[stubs[1]].source = 'raise ValueError("I gave up on the mask")'
    carol.cells = [c for c in carol.cells if "rms_norm" not in check_ids(c.source)]
    nbformat.write(carol, folder / "carol.ipynb")

    dan = copy.deepcopy(solved)
    first_check = next(i for i, c in enumerate(dan.cells) if check_ids(c.source))
    dan.cells.insert(first_check + 1, nbformat.v4.new_code_cell("while True:\n    pass"))
    nbformat.write(dan, folder / "dan.ipynb")

    (folder / "erin.ipynb").write_text("this is {not JSON", encoding="utf-8")
    (folder / "frank.ipynb").write_text('{"cells": "nope"}', encoding="utf-8")
    (folder / "notes.txt").write_text("not a notebook, ignored")


def test_grade_a_class(tmp_path, capsys):
    assigned_dir = tmp_path / "assigned"
    assert main(["assign", str(LESSON), "--out", str(assigned_dir)]) == 0
    submissions, out = tmp_path / "submissions", tmp_path / "report"
    make_submissions(submissions, assigned_dir / LESSON.name)
    before = digest(submissions)
    capsys.readouterr()

    timeout = 25
    start = time.perf_counter()
    code = main(["grade", str(submissions), "--out", str(out), "--timeout", str(timeout),
                 "--assignment", str(assigned_dir / LESSON.name)])
    elapsed = time.perf_counter() - start
    printed = capsys.readouterr().out
    assert code == 0
    assert digest(submissions) == before, "grade must never write into the submissions"
    # the endless loop costs one timeout; four real notebooks of a few seconds each
    assert elapsed < timeout + 4 * 20, elapsed

    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows == json.loads((out / "grades.json").read_text(encoding="utf-8"))
    got = {(r["student"], r["exercise"]): (r["status"], r["message"]) for r in rows}
    exercises = ["softmax", "causal_mask", "rms_norm"]
    assert sorted({r["student"] for r in rows}) == ["alice", "bob", "carol", "dan", "erin", "frank"]
    assert len(rows) == 6 * 3
    for ex in exercises:
        assert got[("alice", ex)][0] == "pass"
        assert got[("bob", ex)][0] == "not-attempted"      # the empty copy ran to the end
        for bad in ("erin", "frank"):
            assert got[(bad, ex)][0] == "error" and "not a valid notebook" in got[(bad, ex)][1]
    assert got[("carol", "softmax")][0] == "fail" and "overflowed" in got[("carol", "softmax")][1]
    assert got[("carol", "causal_mask")] [0] == "error"
    assert "NameError" in got[("carol", "causal_mask")][1] and "cell" in got[("carol", "causal_mask")][1]
    assert got[("carol", "rms_norm")][0] == "error" and "missing" in got[("carol", "rms_norm")][1]
    assert got[("dan", "softmax")][0] == "pass"           # reported before the loop started
    for ex in ("causal_mask", "rms_norm"):
        assert got[("dan", ex)][0] == "error" and f"did not finish within {timeout} s" in got[("dan", ex)][1]
    assert "alice" in printed and "3/3" in printed and "not-attempted" in printed


def test_rows_without_an_assignment_use_the_notebook_metadata():
    nb = nbformat.v4.new_notebook(metadata={"llmlab": {"exercises": ["softmax", "top_p"]}})
    nb.cells = [nbformat.v4.new_code_cell("1/0"), nbformat.v4.new_code_cell("check('softmax', f)")]
    info = {"status": "ok", "detail": "", "notebook": nb, "stopped_at": None,
            "reports": [{"exercise": "softmax", "passed": True, "status": "pass", "message": "ok"},
                        {"exercise": "extra", "passed": False, "status": "fail", "message": "no"}],
            "cell_errors": {0: "ZeroDivisionError: division by zero"}}
    rows = rows_for("zoe", info, [])
    assert [(r["exercise"], r["status"]) for r in rows] == [("softmax", "pass"), ("top_p", "error"), ("extra", "fail")]
    assert "missing" in rows[1]["message"]
    info["reports"] = []
    rows = rows_for("zoe", info, ["softmax"])
    assert rows[0]["status"] == "error" and "ZeroDivisionError" in rows[0]["message"]


def test_cli_module_runs_and_lists_exercises():
    result = subprocess.run([sys.executable, "-m", "llmlab.cli", "exercises"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "softmax(x, dim=-1)" in result.stdout and "ch.  5" in result.stdout


def test_grade_reports_bad_arguments(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["grade", str(tmp_path / "empty"), "--out", str(tmp_path / "r")]) == 2
    assert "no .ipynb files" in capsys.readouterr().err


def test_check_inside_a_jupyter_kernel(tmp_path):
    """In a kernel: the time limit stops a `while True` loop, and a cell ending in check(...) shows
    one HTML result (not the HTML and then the returned object again)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("from llmlab.exercises import check\n"
                                  "def softmax(x, dim=-1):\n    while True:\n        pass\n"
                                  "r = check('softmax', softmax, time_limit=1)\nassert r.status == 'fail', r"),
        nbformat.v4.new_code_cell("def softmax(x, dim=-1):\n    return x.softmax(dim)\ncheck('softmax', softmax)"),
    ]
    path = tmp_path / "kernel.ipynb"
    nbformat.write(nb, path)
    info = execute_notebook(path, timeout=60)
    assert info["status"] == "ok" and info["cell_errors"] == {}, info
    assert [r["status"] for r in info["reports"]] == ["fail", "pass"]
    assert "did not return within 1 s" in info["reports"][0]["message"]
    outputs = info["notebook"].cells[1].outputs
    assert [o["output_type"] for o in outputs] == ["display_data"]
    assert "Passed" in outputs[0]["data"]["text/html"]
