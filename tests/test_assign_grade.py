"""`llmlab assign` and `llmlab grade`: student copies carry no solution code and still run; grading
turns every kind of submission (solved, empty, raising, looping, not JSON) into the right rows, and
hostile submissions (fake passes, sabotage, processes that outlive the kernel, leaks) gain nothing."""
from __future__ import annotations

import ast
import copy
import csv
import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from llmlab import assert_same_bits
from llmlab.cli import main
from llmlab.grading.assign import check_ids, is_solution, stub_source, student_copy
from llmlab.grading.grade import run_submission
from llmlab.grading.reports import csv_cell
from llmlab.grading.sandbox import bwrap_works
from llmlab.grading.submissions import Submission, parse

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "llmlab" / "grading" / "data"     # the example lesson, shipped with the package
LESSON = FIXTURES / "attention_lesson.ipynb"
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
SOURCES = [LESSON] + CHAPTERS


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
        assert "solution" not in [str(t).lower() for t in cell.metadata.get("tags", [])]
        if cell.cell_type == "markdown":
            assert "{solution" not in cell.source.lower()
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
    # no output of any cell, and no exercise text lost: a markdown cell keeps every line before its
    # first solution marker, and a cell without markers stays as it was
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in student.cells if c.cell_type == "code")
    student_text = "\n".join(c.source for c in student.cells if c.cell_type == "markdown")
    for cell in source.cells:
        if cell.cell_type == "markdown" and not is_solution(cell):
            before = cell.source.lower().split("{solution")[0].rsplit("\n", 1)[0] if "{solution" in cell.source.lower() \
                else cell.source
            assert cell.source[:len(before)] in student_text


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


def test_solution_markers_are_cut_exactly():
    """Cells are split at the markers: exercise text around a solution stays, gated code is stubbed,
    tags and directives match in any case, indented and quoted blocks go too."""
    nb = nbformat.v4.new_notebook()
    upper = nbformat.v4.new_code_cell("def helper(x):\n    return x * 4321")
    upper.metadata["tags"] = ["Solution"]
    md_upper = nbformat.v4.new_markdown_cell("secret SHOUTED answer")
    md_upper.metadata["tags"] = ["SOLUTION"]
    nb.cells = [
        nbformat.v4.new_markdown_cell("Exercise 1: write f.\n\n```{solution-start} s1\n:class: dropdown\n```\nsecret gated prose"),
        nbformat.v4.new_code_cell("def f(x):\n    return x + 9876"),
        nbformat.v4.new_markdown_cell("secret middle\n```{solution-end}\n```\nExercise 2 comes next."),
        nbformat.v4.new_code_cell("check('softmax', f)"),
        nbformat.v4.new_markdown_cell("1. Why?\n\n   ```{Solution} q\n   secret indented\n   ```\n\n"
                                      "> Note\n> ````{solution} q2\n> ```python\n> secret_quoted()\n> ```\n> ````\n"
                                      "\n:::{solution} q3\nsecret colon\n:::\nThe end."),
        upper, md_upper, nbformat.v4.new_code_cell("check('top_p', helper)"),
    ]
    student, ids = student_copy(nb)
    text = "\n".join(c.source for c in student.cells)
    assert ids == ["softmax", "top_p"]
    for secret in ("secret", "9876", "4321", ":class:", "{solution"):
        assert secret not in text, secret
    for kept in ("Exercise 1: write f.", "Exercise 2 comes next.", "1. Why?", "> Note", "The end.",
                 "def f(x):", "def helper(x):", 'raise NotImplementedError("Exercise softmax'):
        assert kept in text, kept
    assert [c.cell_type for c in student.cells] == ["markdown", "code", "markdown", "code", "markdown", "code",
                                                    "markdown", "code"]


@pytest.mark.parametrize("source, where", [
    ("Q\n```{solution} a\nsecret", "cell 1, line 2"),
    ("Q\n  > :::{solution} a\n  > secret", "cell 1, line 2"),
    ("Q\n```{solution-start} a\n```\nsecret", "cell 1, line 2"),
])
def test_unclosed_solution_is_an_error(source, where, tmp_path, capsys):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(source)]
    nbformat.write(nb, tmp_path / "bad.ipynb")
    assert main(["assign", str(tmp_path / "bad.ipynb"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "bad.ipynb" in err and where in err and ("never closed" in err or "no {solution-end}" in err), err
    assert not (tmp_path / "out" / "bad.ipynb").exists()


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
    exercise = check_ids(student.cells[first_check].source)[0]
    sub = Submission(path.stem, path.name, nbformat.writes(student).encode("utf-8"))
    parse(sub)
    info = run_submission(sub, [exercise], timeout=300)
    assert info["status"] == "ok", info["detail"]
    stub_cells = {i for i, c in enumerate(student.cells) if "exercise" in c.metadata.get("tags", [])}
    assert sub.cell_errors == {}, (
        f"cells raised before the first exercise's check ran: {sub.cell_errors} "
        f"({'a stub cell' if stub_cells & set(sub.cell_errors) else 'cells the chapter itself owns, not stubs'})")
    assert info["results"][exercise].status == "not-attempted"


# ------------------------------------------------------------------------------------------ grade

EXERCISES = ["softmax", "causal_mask", "rms_norm"]
TIMEOUT = 30      # seconds per notebook; dan's endless loop costs exactly this
CALL_LIMIT = 2    # seconds per call of a learner's function, timed by the grader
SECRET = "llmlab-secret-4f1c9e"


def with_cells(student, answers: dict | None = None, prelude: str = "", drop: str = "") -> nbformat.NotebookNode:
    """A copy of the student notebook: stub cells replaced by `answers` (exercise -> source), `prelude`
    inserted after the import cell, and the check cell of `drop` deleted."""
    nb = copy.deepcopy(student)
    stubs = [i for i, c in enumerate(nb.cells) if "exercise" in c.metadata.get("tags", [])]
    for ex, index in zip(EXERCISES, stubs):
        if answers and ex in answers:
            nb.cells[index].source = answers[ex]
    if drop:
        nb.cells = [c for c in nb.cells if drop not in check_ids(c.source)]
    if prelude:
        nb.cells.insert(2, nbformat.v4.new_code_cell(prelude))
    return nb


def make_submissions(folder: Path, assigned: Path, paths: dict) -> None:
    """Honest: alice (full solution), grace (the same, saved as .IPYNB), bob (the empty copy), carol
    (a wrong softmax, a cell that raises, a deleted check cell), dan (an endless loop after the first
    check). Broken: erin (not JSON), frank (cells not a list), heidi (a cell whose source is a number),
    '=1+2' (a name that is a spreadsheet formula), mallory (a symlink to a file that is not hers).
    Hostile ones start with h_ and are described in TestHostileSubmissions."""
    folder.mkdir()
    solved = nbformat.read(LESSON, as_version=4)
    student = nbformat.read(assigned, as_version=4)
    nbformat.write(solved, folder / "alice.ipynb")
    nbformat.write(solved, folder / "grace.IPYNB")
    nbformat.write(student, folder / "bob.ipynb")
    nbformat.write(with_cells(student, {
        "softmax": "def softmax(x, dim=-1):\n    e = x.exp()\n    return e / e.sum(dim, keepdim=True)",
        "causal_mask": 'raise ValueError("I gave up on the mask")'}, drop="rms_norm"), folder / "carol.ipynb")
    dan = copy.deepcopy(solved)
    first_check = next(i for i, c in enumerate(dan.cells) if check_ids(c.source))
    dan.cells.insert(first_check + 1, nbformat.v4.new_code_cell("while True:\n    pass"))
    nbformat.write(dan, folder / "dan.ipynb")
    (folder / "erin.ipynb").write_text("this is {not JSON", encoding="utf-8")
    (folder / "frank.ipynb").write_text('{"cells": "nope"}', encoding="utf-8")
    heidi = json.loads(nbformat.writes(student))
    heidi["cells"][3]["source"] = 5
    (folder / "heidi.ipynb").write_text(json.dumps(heidi), encoding="utf-8")
    (folder / "=1+2.ipynb").write_text("not a notebook", encoding="utf-8")
    (folder / "mallory.ipynb").symlink_to(paths["secret"])
    (folder / "notes.txt").write_text("not a notebook, ignored")

    # fake passes
    nbformat.write(with_cells(student, prelude=(
        "import llmlab.exercises as E\nfrom llmlab.exercises.results import CheckResult\n\n"
        "def check(exercise, fn, **kw):\n    r = CheckResult(exercise, 'pass', 'well done')\n    print(r)\n    return r\n\n"
        "E.check = check")), folder / "h_redefine_check.ipynb")
    nbformat.write(with_cells(student, prelude=(
        "import json, os\nimport llmlab.grading.wire as W\n"
        "for ex in %r:\n    line = json.dumps({'exercise': ex, 'passed': 1, 'status': 'PASS!!', 'message': 'ok'})\n"
        "    for path in [os.environ.get('LLMLAB_GRADE_REPORT') or 'checks.jsonl', 'checks.jsonl', '../checks.jsonl']:\n"
        "        try:\n            open(path, 'a').write(line + '\\n')\n        except OSError:\n            pass\n"
        "real_serve = W.serve\n\n"
        "def serve(request):  # answer every call with a status instead of a value\n"
        "    if json.loads(request).get('op') == 'list':\n        return real_serve(request)\n"
        "    return json.dumps({'status': 'PASS!!', 'passed': 1, 'message': 'well done'})\n\n"
        "W.serve = serve" % EXERCISES)), folder / "h_report_and_status.ipynb")
    nbformat.write(with_cells(student, {
        "softmax": "class Always(torch.Tensor):\n    def __eq__(self, other):\n        return True\n\n"
                   "def softmax(x, dim=-1):\n    return torch.zeros_like(x).as_subclass(Always)",
        "causal_mask": "def causal_mask(T):\n    return torch.zeros(T, T, dtype=torch.bool).as_subclass(Always)",
        "rms_norm": "class Yes:\n    def __eq__(self, other):\n        return True\n\n"
                    "def rms_norm(x, weight, eps=1e-6):\n    return Yes()"}), folder / "h_custom_eq.ipynb")
    nbformat.write(with_cells(student, {
        "softmax": "import os, signal, sys\n\n"
                   "def softmax(x, dim=-1):\n    if sys._getframe(1).f_code.co_name == 'serve':  # only under the grader\n"
                   "        signal.setitimer(signal.ITIMER_REAL, 0)\n        signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                   "        while True:\n            pass\n    return torch.softmax(x, dim)"}), folder / "h_timer_off.ipynb")
    nbformat.write(with_cells(student, {
        "softmax": "import inspect\nimport llmlab.exercises.checks_attention as C\nfrom llmlab.exercises.core import generator\n"
                   "from llmlab.attention import softmax as reference\n"
                   "assert 'generator(5)' in inspect.getsource(C.check_softmax)  # the hidden cases, read\n"
                   "g = generator(5)\n"
                   "batch = torch.randn(2, 3, 5, generator=g)\nbatch[1] += 1000.0\n"
                   "cases = [(torch.tensor([[1.0, 2.0, 3.0], [1001.0, 1002.0, 1003.0]]), -1), (batch, -1),\n"
                   "         (torch.randn(4, 6, generator=g) * 3 + 800.0, 0),\n"
                   "         (torch.tensor([[0.5, float('-inf'), 2.0, 1.0], [-999.5, float('-inf'), -998.0, -999.0]]), -1),\n"
                   "         (torch.tensor([[1000.0, 1001.0, 1002.0]]), -1)]\n"
                   "table = [(x, reference(x, dim=d)) for x, d in cases]\n\n"
                   "def softmax(x, dim=-1):  # right on the cases it has read, zeros elsewhere\n"
                   "    for known, answer in table:\n"
                   "        if known.shape == x.shape and torch.equal(known, x):\n            return answer\n"
                   "    return torch.zeros_like(x)"}), folder / "h_hidden_inputs.ipynb")
    # sabotage and escape: writes from the kernel and from a child in a new session that tries for a minute
    targets = {"write": [str(paths["out"] / "grades.csv"), str(paths["out"] / "grades.json"), str(folder / "alice.ipynb"),
                         str(paths["home_marker"])],
               "delete": [str(assigned), str(paths["source"])]}
    attack = ("import json, pathlib, time\nT = json.loads(%r)\n"
              "for _ in range(%d):\n    for p in T['write']:\n        try:\n"
              "            pathlib.Path(p).write_text('student,exercise,status,message\\nh_sabotage,softmax,pass,owned\\n')\n"
              "        except OSError:\n            pass\n    for p in T['delete']:\n        try:\n"
              "            pathlib.Path(p).unlink()\n        except OSError:\n            pass\n    time.sleep(0.2)\n")
    nbformat.write(with_cells(student, {
        "softmax": "import os\n\ndef softmax(x, dim=-1):\n"
                   "    try:\n        parent = open(f'/proc/{os.getppid()}/cmdline').read()\n    except OSError:\n        parent = ''\n"
                   "    caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0]\n"
                   "    raise ValueError(f'env={os.environ.get(\"LLMLAB_TEST_SECRET\")} caps={caps} parent={parent} '\n"
                   "                     f'home={os.path.expanduser(\"~\")}')"},
        prelude=("import socket, subprocess, sys\n"
                 f"exec({attack % (json.dumps(targets), 1)!r})\n"
                 f"subprocess.Popen([sys.executable, '-c', {attack % (json.dumps(targets), 300)!r}, '{paths['marker']}'],\n"
                 "                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                 "try:\n"
                 f"    socket.create_connection(('127.0.0.1', {paths['port']}), timeout=2).sendall(b'leak')\n"
                 "except OSError:\n    pass")), folder / "h_sabotage.ipynb")


def running_with(marker: str) -> list[int]:
    """Processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One `llmlab grade` run over the whole class, honest and hostile submissions together."""
    import contextlib
    import io
    import os
    import socket

    tmp = tmp_path_factory.mktemp("class")
    assigned_dir = tmp / "assigned"
    assert main(["assign", str(LESSON), "--out", str(assigned_dir)]) == 0
    secret = tmp / "private" / "notes.ipynb"
    secret.parent.mkdir()
    secret.write_text('{"cells": [], "note": "TOP-SECRET-TEXT"}', encoding="utf-8")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.setblocking(False)
    (tmp / "instructor").mkdir()
    shutil.copy(LESSON, tmp / "instructor" / LESSON.name)   # the instructor's source with solutions
    paths = {"out": tmp / "report", "secret": secret, "source": tmp / "instructor" / LESSON.name,
             "home_marker": Path.home() / "llmlab-grade-test-marker",
             "marker": f"llmlab-escape-{os.getpid()}", "port": listener.getsockname()[1]}
    submissions = tmp / "submissions"
    make_submissions(submissions, assigned_dir / LESSON.name, paths)
    before = digest(submissions)
    os.environ["LLMLAB_TEST_SECRET"] = SECRET
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["grade", str(submissions), "--out", str(paths["out"]), "--timeout", str(TIMEOUT),
                         "--call-limit", str(CALL_LIMIT), "--assignment", str(assigned_dir / LESSON.name),
                         "--jobs", "2"])
    finally:
        del os.environ["LLMLAB_TEST_SECRET"]
    try:
        connection = listener.accept()[0]
        connection.close()
        connected = True
    except BlockingIOError:
        connected = False
    listener.close()
    time.sleep(1.0)   # anything that survived the grader would write again within 0.2 s
    home_written = paths["home_marker"].exists()
    paths["home_marker"].unlink(missing_ok=True)
    with open(paths["out"] / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return {"code": code, "printed": out.getvalue(), "warned": err.getvalue(), "rows": rows, "paths": paths,
            "json": json.loads((paths["out"] / "grades.json").read_text(encoding="utf-8")),
            "got": {(r["student"], r["exercise"]): (r["status"], r["message"]) for r in rows},
            "submissions": submissions, "before": before, "after": digest(submissions),
            "assigned": assigned_dir / LESSON.name, "connected": connected, "home_written": home_written,
            "survivors": running_with(paths["marker"])}


class TestHonestClass:
    """Honest and broken submissions get the grades they always had, with messages that say why."""

    def test_every_expected_exercise_has_a_row_with_a_known_status(self, graded):
        rows = graded["rows"]
        assert graded["code"] == 0
        assert rows == [{k: csv_cell(v) for k, v in r.items()} for r in graded["json"]]   # CSV = JSON, escaped
        students = {r["student"] for r in graded["json"]}
        assert len(graded["json"]) == len(students) * 3 and {r["exercise"] for r in rows} == set(EXERCISES)
        assert {r["status"] for r in rows} <= {"pass", "fail", "not-attempted", "error"}
        assert "notes" not in students

    def test_grades(self, graded):
        got = graded["got"]
        for ex in EXERCISES:
            assert got[("alice", ex)][0] == "pass" and got[("grace", ex)][0] == "pass", got[("grace", ex)]
            assert got[("bob", ex)][0] == "not-attempted"      # the empty copy ran to the end
            for bad in ("erin", "frank", "heidi"):
                assert got[(bad, ex)][0] == "error" and "not a valid notebook" in got[(bad, ex)][1]
        assert got[("carol", "softmax")][0] == "fail" and "overflowed" in got[("carol", "softmax")][1]
        assert got[("carol", "causal_mask")][0] == "error"
        assert "NameError" in got[("carol", "causal_mask")][1] and "cell" in got[("carol", "causal_mask")][1]
        assert got[("carol", "rms_norm")][0] == "error" and "missing" in got[("carol", "rms_norm")][1]
        assert got[("dan", "softmax")][0] == "pass"           # handed in before the loop started
        for ex in ("causal_mask", "rms_norm"):
            assert got[("dan", ex)][0] == "error" and f"did not finish within {TIMEOUT} s" in got[("dan", ex)][1]
        assert "cells/3/source" in got[("heidi", "softmax")][1]   # says which cell is malformed
        assert "alice" in graded["printed"] and "3/3" in graded["printed"] and "not-attempted" in graded["printed"]

    def test_submissions_are_only_read_and_the_sheet_is_checksummed(self, graded):
        assert graded["after"] == graded["before"], "grade must never write into the submissions"
        assert graded["assigned"].exists() and graded["paths"]["source"].exists()
        for name in ("grades.csv", "grades.json"):
            data = (graded["paths"]["out"] / name).read_bytes()
            assert f"sha256 {hashlib.sha256(data).hexdigest()}" in graded["printed"]

    def test_csv_cells_cannot_become_formulas(self, graded):
        text = (graded["paths"]["out"] / "grades.csv").read_text(encoding="utf-8")
        assert "\n'=1+2," in text and "\n=1+2" not in text
        assert any(r["student"] == "=1+2" for r in graded["json"])   # the JSON keeps the real name


class TestHostileSubmissions:
    """Each hostile technique is one submission; none gains a pass, changes a file outside its sandbox
    or survives the grader."""

    HOSTILE = ["h_redefine_check", "h_report_and_status", "h_custom_eq", "h_timer_off", "h_hidden_inputs",
               "h_sabotage", "mallory"]

    def test_the_notebooks_ran_in_the_sandbox(self, graded):
        assert bwrap_works(), "bubblewrap is missing or cannot make namespaces here (make browser installs it)"
        assert "runs in a bubblewrap sandbox" in graded["printed"] and "WARNING" not in graded["warned"]

    def test_no_hostile_submission_passes_anything(self, graded):
        for student in self.HOSTILE:
            for ex in EXERCISES:
                assert graded["got"][(student, ex)][0] != "pass", (student, ex, graded["got"][(student, ex)])

    def test_redefined_check_hands_nothing_to_the_grader(self, graded):
        status, message = graded["got"][("h_redefine_check", "softmax")]
        assert status == "error" and "handed no function to the grader" in message

    def test_report_lines_and_invented_statuses_count_for_nothing(self, graded):
        status, message = graded["got"][("h_report_and_status", "softmax")]
        assert status == "error" and "only the grader decides" in message

    def test_custom_equality_fails(self, graded):
        got = graded["got"]
        assert got[("h_custom_eq", "softmax")][0] == "fail" and "Always" in got[("h_custom_eq", "softmax")][1]
        assert got[("h_custom_eq", "rms_norm")][0] == "fail" and "Yes" in got[("h_custom_eq", "rms_norm")][1]

    def test_the_time_limit_is_kept_by_the_grader(self, graded):
        status, message = graded["got"][("h_timer_off", "softmax")]
        assert status == "fail" and f"did not return within {CALL_LIMIT} s" in message
        assert graded["got"][("h_timer_off", "causal_mask")][0] == "error"   # the kernel was given up

    def test_answers_copied_for_the_readable_cases_fail_on_the_graders_cases(self, graded):
        assert graded["got"][("h_hidden_inputs", "softmax")][0] == "fail"

    def test_sabotage_changes_nothing_and_sees_nothing(self, graded):
        assert graded["after"] == graded["before"]
        assert graded["assigned"].exists() and graded["paths"]["source"].exists(), "the instructor's sources must survive"
        assert not graded["home_written"], "the real home folder was written"
        assert not graded["connected"], "a submission reached the network"
        assert not graded["survivors"], "a process started by a submission outlived the grader"
        assert all("owned" not in r["message"] for r in graded["rows"])
        assert (graded["paths"]["out"] / "grades.csv").read_text(encoding="utf-8").count("\n") > 10
        status, message = graded["got"][("h_sabotage", "softmax")]
        assert status == "fail" and "env=None" in message and "caps=0000000000000000" in message, message
        assert SECRET not in message and str(graded["submissions"]) not in message and "pytest" not in message

    def test_feedback_files_hold_nothing_private(self, graded):
        """Each feedback file is its own student's: no classmate, no secret, no path of the grading machine."""
        feedback = graded["paths"]["out"] / "feedback"
        students = {r["student"] for r in graded["json"]}
        from llmlab.grading.feedback import safe_name
        assert {p.name for p in feedback.glob("*.html")} == {safe_name(s) + ".html" for s in students}
        for path in feedback.iterdir():
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".ipynb":   # the student's own code may name paths; the outputs must not leak any
                text = json.dumps([c.get("outputs") for c in nbformat.reads(text, as_version=4).cells])
            for private in (SECRET, str(graded["submissions"]), str(graded["paths"]["out"]), str(Path.home()),
                            "TOP-SECRET", "/tmp/llmlab-grade-"):
                assert private not in text, (path.name, private)
        assert "alice" not in (feedback / "bob.html").read_text(encoding="utf-8")
        assert (feedback / "alice.ipynb").exists() and not (feedback / "erin.ipynb").exists()

    def test_symlinks_are_refused_and_not_read(self, graded):
        status, message = graded["got"][("mallory", "softmax")]
        assert status == "error" and "symbolic link" in message
        assert "TOP-SECRET" not in (graded["paths"]["out"] / "grades.csv").read_text(encoding="utf-8")


def fake_bwrap(folder: Path) -> str:
    """A folder holding a `bwrap` that cannot make namespaces (as in a container that forbids them),
    first on a PATH that still finds everything else."""
    import os
    folder.mkdir()
    (folder / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    (folder / "bwrap").chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def test_grade_refuses_to_run_anything_without_a_sandbox(tmp_path, capsys, monkeypatch):
    """Where bwrap cannot make a sandbox, or is missing, grade runs nothing, writes nothing, and says why
    and what to do."""
    marker = tmp_path / "ran"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write('the notebook ran')")]
    (tmp_path / "subs").mkdir()
    nbformat.write(nb, tmp_path / "subs" / "eve.ipynb")
    args = ["grade", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--expected", "softmax"]
    monkeypatch.setenv("PATH", fake_bwrap(tmp_path / "bin"))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "cannot make a sandbox here: bwrap: No permissions to creating new namespace" in err, err
    assert "install bubblewrap" in err and "virtual machine" in err and "--unsafe-no-sandbox" in err
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))   # no bwrap at all
    assert main(args) == 2
    assert "bubblewrap (bwrap) is not installed" in capsys.readouterr().err
    assert not marker.exists() and not (tmp_path / "out").exists()
    from llmlab.grading.sandbox import SandboxUnavailable
    sub = Submission("eve", "eve.ipynb", (tmp_path / "subs" / "eve.ipynb").read_bytes())
    parse(sub)
    with pytest.raises(SandboxUnavailable, match="not installed"):   # the lower layer refuses too
        run_submission(sub, ["softmax"], timeout=30)
    assert not marker.exists()
    assert main(args[:-2] + ["--expected", "softmax", "--no-sandbox"]) == 2   # the old flag's name explains itself
    assert "--no-sandbox is now called --unsafe-no-sandbox" in capsys.readouterr().err


def test_unsafe_no_sandbox_runs_warns_and_kills_what_escapes(tmp_path, capsys, monkeypatch):
    """--unsafe-no-sandbox, where no sandbox can be made: a warning that says what is not contained,
    and a child started in a new session still dies with the notebook."""
    import os
    monkeypatch.setenv("PATH", fake_bwrap(tmp_path / "bin"))
    marker = f"llmlab-fallback-{os.getpid()}"
    beat = tmp_path / "heartbeat"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import subprocess, sys\n"
        f"loop = {f'import pathlib, time{chr(10)}for i in range(600):{chr(10)}    pathlib.Path({str(beat)!r}).write_text(str(i)); time.sleep(0.1)'!r}\n"
        f"subprocess.Popen([sys.executable, '-c', loop, {marker!r}], start_new_session=True)\n"
        f"import os, time\nfor _ in range(300):\n    if os.path.exists({str(beat)!r}):\n        break\n    time.sleep(0.1)\n"
        "from llmlab.exercises import check\n\ndef softmax(x, dim=-1):\n    return x.softmax(dim)\n\ncheck('softmax', softmax)")]
    (tmp_path / "subs").mkdir()
    nbformat.write(nb, tmp_path / "subs" / "eve.ipynb")
    assert main(["grade", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--expected", "softmax",
                 "--timeout", "60", "--unsafe-no-sandbox"]) == 0
    captured = capsys.readouterr()
    assert "NOT sandboxed" in captured.err and "NOT contained" in captured.err
    row = json.loads((tmp_path / "out" / "grades.json").read_text())[0]
    assert row["status"] == "pass", row
    assert not running_with(marker), "the escaped child survived the grader"
    assert beat.exists(), "the child never ran: the test would prove nothing"
    last = beat.read_text()
    time.sleep(0.5)
    assert beat.read_text() == last


def test_remote_answers_keep_every_exercise_verdict(monkeypatch):
    """Through the grader's channel (serialised inputs and answers, salted hidden cases), every right
    solution of the exercise tests still passes and every wrong one fails with the same hint."""
    from test_exercises import RIGHT, WRONG

    import llmlab.exercises as exercises
    from llmlab.exercises import core, run_check
    from llmlab.grading import wire
    from llmlab.grading.remote import RemoteLearner

    class InProcessKernel:
        gone = ""

        def request(self, payload, limit):
            return json.loads(wire.serve(json.dumps(payload)))

    monkeypatch.setattr(core, "_SALT", 918273)
    for exercise, fn, words in [(e, f, None) for e, f in RIGHT.items()] + WRONG:
        monkeypatch.setattr(exercises, "SUBMITTED", {exercise: fn})
        result = run_check(exercise, RemoteLearner(InProcessKernel(), exercise, 10), partial=True)
        if words is None:
            assert result.status == "pass", (exercise, result.message)
        else:
            assert result.status == "fail", (exercise, fn.__name__, result.message)
            assert all(w in result.message for w in words), (exercise, fn.__name__, result.message)


def test_answers_are_decoded_into_exact_types():
    import numpy as np
    import torch

    from llmlab.grading import wire

    class Sub(torch.Tensor):
        pass

    class Eq:
        def __eq__(self, other):
            return True

    x = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    back = wire.decode(wire.encode(x))
    assert type(back) is torch.Tensor and back.dtype == torch.bfloat16 and torch.equal(back, x)
    assert type(wire.decode(wire.encode(x.as_subclass(Sub)))).__name__ == "Sub"
    assert not (wire.decode(wire.encode(Eq())) == 12)
    from collections import Counter
    assert wire.decode(wire.encode(Counter({(1, 2): 2}))) == {(1, 2): 2}
    assert type(wire.decode(wire.encode(np.int64(3)))) is np.int64
    assert str(wire.decode(wire.encode(float("nan")))) == "nan"
    from llmlab.config import ModelConfig
    from llmlab.model import Transformer
    model = Transformer(ModelConfig.preset("tiny-llama")).eval()
    sent = wire.encode(model)   # a check's small model travels to the kernel, which rebuilds it exactly
    rebuilt = wire.decode(sent, functions=True)
    ids = torch.tensor([[1, 2, 3]])
    assert type(rebuilt) is Transformer and not rebuilt.training and torch.equal(rebuilt(ids), model(ids))
    for bad in [{"t": "tensor", "dtype": "float32", "shape": [2], "data": ""}, {"t": "PASS!!"}, [1], {"t": "int", "v": "1"},
                sent]:   # the grader never builds a model from what a kernel sends

        with pytest.raises(wire.WireError):
            wire.decode(bad)


def test_csv_cell_escapes_formula_starts():
    for text in ["=1+2", "+1", "-1", "@SUM(A1)", "\tx", "\rx"]:
        assert csv_cell(text) == "'" + text
    assert csv_cell("softmax(x) returned 1") == "softmax(x) returned 1"


def test_cli_module_runs_and_lists_exercises():
    result = subprocess.run([sys.executable, "-m", "llmlab.cli", "exercises"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "ch.   5  softmax" in result.stdout and "softmax(x, dim=-1)" in result.stdout
    assert "ch. 10b  dequantize_q4_1" in result.stdout and "ch.  10  kv_cache_bytes" in result.stdout
    import llmlab
    version = subprocess.run([sys.executable, "-m", "llmlab.cli", "--version"], capture_output=True, text=True,
                             cwd=ROOT, timeout=120)
    assert version.returncode == 0 and version.stdout.strip() == f"llmlab {llmlab.__version__}"


def test_grade_reports_bad_arguments(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r"), "--expected", "softmax"]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["grade", str(tmp_path / "empty"), "--out", str(tmp_path / "r"), "--expected", "softmax"]) == 2
    assert "no .ipynb files" in capsys.readouterr().err
    assert main(["grade", str(tmp_path / "empty"), "--out", str(tmp_path / "r")]) == 2
    assert "never comes from the submissions" in capsys.readouterr().err
    assert main(["grade", str(tmp_path / "empty"), "--out", str(tmp_path / "r"), "--expected", "sofmax"]) == 2
    assert "unknown exercise" in capsys.readouterr().err


def test_missing_instructor_extra_is_explained(tmp_path):
    """Without nbformat/nbclient/ipykernel the CLI says what to install instead of a traceback."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    for name in ("nbformat", "nbclient", "ipykernel"):
        (blocker / f"{name}.py").write_text("raise ImportError('blocked for the test', name=__name__)")
    env = {"PYTHONPATH": f"{blocker}:{ROOT}", "PATH": "/usr/bin:/bin"}
    for args in (["assign", str(LESSON), "--out", str(tmp_path / "o")],
                 ["grade", str(tmp_path), "--out", str(tmp_path / "r"), "--expected", "softmax"]):
        result = subprocess.run([sys.executable, "-m", "llmlab.cli"] + args, capture_output=True, text=True,
                                cwd=tmp_path, env=env, timeout=120)
        assert result.returncode == 2, result.stderr
        from llmlab.notebook import install_command
        assert "Traceback" not in result.stderr
        assert "Install it with: pip install" in result.stderr and "[instructor]" in result.stderr, result.stderr
        assert install_command("instructor").startswith("pip install")


def test_check_inside_a_jupyter_kernel(tmp_path):
    """In a kernel: the time limit stops a `while True` loop, and a cell ending in check(...) shows
    one HTML result (not the HTML and then the returned object again)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("from llmlab.exercises import check\n"
                                  "def softmax(x, dim=-1):\n    while True:\n        pass\n"
                                  "r = check('softmax', softmax, time_limit=1)\nassert r.status == 'fail', r\n"
                                  "assert 'did not return within 1 s' in r.message"),
        nbformat.v4.new_code_cell("def softmax(x, dim=-1):\n    return x.softmax(dim)\ncheck('softmax', softmax)"),
    ]
    sub = Submission("k", "k.ipynb", nbformat.writes(nb).encode("utf-8"))
    parse(sub)
    info = run_submission(sub, ["softmax"], timeout=60)
    assert info["status"] == "ok" and sub.cell_errors == {}, (info, sub.cell_errors)
    assert info["results"]["softmax"].status == "pass"
    outputs = sub.notebook.cells[1].outputs
    assert [o["output_type"] for o in outputs] == ["display_data"]
    assert "Passed" in outputs[0]["data"]["text/html"]


def test_the_sandbox_keeps_torch_threads_from_spinning(monkeypatch):
    """Graded kernels get OMP_WAIT_POLICY=PASSIVE unless the grader sets its own: with a core taken by
    another submission, spinning threads stall every parallel operation."""
    from llmlab.grading.sandbox import Box

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    box = Box(sandboxed=False)
    try:
        assert box.env()["OMP_WAIT_POLICY"] == "PASSIVE"
        monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
        assert box.env()["OMP_WAIT_POLICY"] == "ACTIVE"
    finally:
        shutil.rmtree(box.root, ignore_errors=True)


def test_side_by_side_kernels_share_the_cores(monkeypatch):
    """With --jobs N each kernel (and each worker's own torch) gets the cores / N threads, so two jobs
    on two cores do not run four threads; an OMP_NUM_THREADS the instructor set wins."""
    from llmlab.grading.sandbox import Box, job_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert (job_threads(1, 8), job_threads(2, 8), job_threads(3, 8), job_threads(16, 8), job_threads(2, 2)) == \
        (None, 4, 2, 1, 1)
    box = Box(sandboxed=False, threads=4)
    try:
        assert box.env()["OMP_NUM_THREADS"] == "4" and box.env()["MKL_NUM_THREADS"] == "4"
    finally:
        box.remove()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    box = Box(sandboxed=False)
    try:
        assert job_threads(2, 8) is None and box.env()["OMP_NUM_THREADS"] == "3"
    finally:
        box.remove()


# ------------------------------------------------------------------------------------------ a whole course

def test_submissions_are_found_in_the_layouts_lms_produce(tmp_path):
    """Flat files, a folder per student, Canvas and Moodle downloads: each notebook maps to its student;
    hidden files, other files and links to folders are skipped; a student's newest notebook is graded."""
    import os
    from llmlab.grading.submissions import collect, identify, newest_per_student

    assert identify("alice.IPYNB")["student"] == "alice"
    assert identify("bob/work/05_self_attention.ipynb")["student"] == "bob"
    canvas = identify("smithalice_LATE_12345_67890_05_self_attention.ipynb")
    assert (canvas["student"], canvas["name"], canvas["lms"], canvas["late"]) == ("12345", "smithalice", "canvas", True)
    moodle = identify("Alice Smith_4711_assignsubmission_file_/05_self_attention.ipynb")
    assert (moodle["student"], moodle["name"], moodle["lms"]) == ("4711", "Alice Smith", "moodle")
    assert identify("Alice Smith_4711_assignsubmission_file_05.ipynb")["student"] == "4711"   # no folders

    nb = nbformat.writes(nbformat.v4.new_notebook())
    files = ["alice.ipynb", "bob/a.ipynb", "bob/b.ipynb", "smithalice_12345_100_lesson.ipynb",
             "smithalice_LATE_12345_200_lesson-1.ipynb", "Carl Jones_4711_assignsubmission_file_/x.ipynb",
             ".hidden.ipynb", ".git/objects.ipynb", "notes.txt"]
    for i, name in enumerate(files):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(nb)
        os.utime(tmp_path / name, (1000 + i, 1000 + i))
    os.utime(tmp_path / "bob/a.ipynb", (5000, 5000))              # bob's a.ipynb is the newer one
    for name in ("smithalice_12345_100_lesson.ipynb", "smithalice_LATE_12345_200_lesson-1.ipynb"):
        os.utime(tmp_path / name, (3000, 3000))                    # same time: the larger Canvas number wins
    (tmp_path / "linked").symlink_to(tmp_path / "bob", target_is_directory=True)
    subs = collect(tmp_path)
    assert sorted(s.path for s in subs) == sorted(files[:6])
    kept, superseded = newest_per_student(subs)
    assert {s.student: s.path for s in kept} == {"alice": "alice.ipynb", "bob": "bob/a.ipynb",
                                                 "12345": "smithalice_LATE_12345_200_lesson-1.ipynb",
                                                 "4711": "Carl Jones_4711_assignsubmission_file_/x.ipynb"}
    assert sorted(s.path for s in superseded) == ["bob/b.ipynb", "smithalice_12345_100_lesson.ipynb"]
    assert next(s for s in kept if s.student == "12345").late


def test_roster_maps_students_and_rejects_bad_rosters(tmp_path):
    from llmlab.grading.submissions import Submission, match_roster, read_roster

    def roster(text):
        (tmp_path / "r.csv").write_text(text, encoding="utf-8")
        return tmp_path / "r.csv"

    entries = read_roster(roster("\ufeffStudent,Name,email\n12345,Alice Smith,a@x.org\nbob,Bob B,\ncarol,Carol C,\n"))
    subs = [Submission("12345", "a.ipynb", name="smithalice"), Submission("Bob", "Bob.ipynb"),
            Submission("zed", "zed.ipynb")]
    absent, unknown = match_roster(subs, entries)
    assert [e["student"] for e in absent] == ["carol"] and [s.student for s in unknown] == ["zed"]
    assert (subs[0].name, subs[1].student) == ("Alice Smith", "bob")   # the roster's spelling and name
    for text, words in [("student,grade\nalice,3\n", "columns ['grade'] that llmlab does not know"),
                        ("name\nAlice\n", "no `student` column"),
                        ("student,name\nalice,A\nbob,B\nALICE,A2\n", "'ALICE' twice (lines 2 and 4)"),
                        ("student,name\n,A\n", "line 2: the `student` cell is empty")]:
        with pytest.raises(ValueError, match=".*") as error:
            read_roster(roster(text))
        assert words in str(error.value) and "nothing was graded" in str(error.value), str(error.value)


def test_shards_split_a_class_stably_and_completely():
    from llmlab.grading.submissions import in_shard

    students = [f"student{i}" for i in range(200)] + ["12345", "Alice Smith"]
    shards = [[s for s in students if in_shard(s, (k, 4))] for k in range(1, 5)]
    assert sorted(sum(shards, [])) == sorted(students)                 # each student in exactly one shard
    assert all(25 <= len(shard) <= 75 for shard in shards), [len(s) for s in shards]
    assert shards == [[s for s in students if in_shard(s, (k, 4))] for k in range(1, 5)]   # the same every run
    assert all(in_shard(s, None) for s in students)


def test_points_and_partial_credit():
    """Points come from the registry, the assignment, then --points; a check with several cases gives
    the share of its comparisons that were right, with the message strict checking gives."""
    from llmlab.exercises import check
    from llmlab.exercises.core import Learner
    from llmlab.grading.submissions import exercise_points

    assert exercise_points(["softmax", "rms_norm"]) == {"softmax": 1.0, "rms_norm": 1.0}
    assert exercise_points(["softmax", "rms_norm"], given={"rms_norm": 2.5}) == {"softmax": 1.0, "rms_norm": 2.5}
    with pytest.raises(ValueError, match="not an exercise of this assignment"):
        exercise_points(["softmax"], given={"sdpa": 2})
    nb = nbformat.read(LESSON, as_version=4)
    nb.cells[3].metadata["llmlab"] = {"exercise": "softmax", "points": 4}
    student, _ = student_copy(nb)
    assert student.metadata["llmlab"]["points"] == {"softmax": 4}

    from llmlab.exercises import run_check

    def last_dim_only(x, dim=-1):   # ignores `dim`: right on the four cases with dim=-1, wrong on dim=0
        e = (x - x.max(-1, keepdim=True).values).exp()
        return e / e.sum(-1, keepdim=True)

    strict = check("softmax", last_dim_only, quiet=True)
    partial = run_check("softmax", Learner(last_dim_only, "last_dim_only"), partial=True)
    assert strict.status == partial.status == "fail" and strict.score == 0
    assert_same_bits(partial.score, 4 / 5)            # bit for bit: the score is right / total, this very division
    assert partial.message.startswith(strict.message)
    assert partial.message.endswith("(4 of 5 comparisons right)")

    def no_max(x, dim=-1):   # every hidden case has logits far from 0: exp() overflows or underflows on each
        e = x.exp()
        return e / e.sum(dim, keepdim=True)

    assert run_check("softmax", Learner(no_max, "no_max"), partial=True).score == 0
    assert run_check("softmax", Learner(lambda x, dim=-1: x, "softmax"), partial=True).score == 0
    assert run_check("softmax", Learner(lambda x, dim=-1: [1], "softmax"), partial=True).score == 0   # wrong kind
    assert run_check("softmax", Learner(lambda x, dim=-1: x.softmax(dim), "softmax"), partial=True).score == 1


def fake_run(students: list[str], shard=None) -> tuple[dict, list[dict]]:
    """A run of two exercises (softmax 1 point, rms_norm 2) over `students` without running anything."""
    run = {"title": "lesson 5", "exercises": ["softmax", "rms_norm"], "points": {"softmax": 1, "rms_norm": 2},
           "students": [{"student": s, "name": f"Name {s}", "status": "submitted", "late": s == "12345",
                         "path": f"{s}.ipynb", "superseded": []} for s in students],
           "shard": shard, "finished": 1_790_000_000.0}
    rows = []
    for i, s in enumerate(students):
        rows += [{"student": s, "exercise": "softmax", "status": "pass", "points": 1, "max_points": 1, "message": "ok"},
                 {"student": s, "exercise": "rms_norm", "status": "fail", "points": 0.4 * (i % 3), "max_points": 2,
                  "message": "=HYPERLINK(\"x\")"}]
    return run, rows


def read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_gradebook_and_lms_files_follow_the_published_columns(tmp_path):
    from llmlab.grading.outputs import write_reports

    run, rows = fake_run(["12345", "alice", "4711"])
    write_reports(rows, tmp_path, run)
    book = read_csv(tmp_path / "gradebook.csv")
    assert book[0] == ["student", "name", "status", "late", "softmax", "rms_norm", "total", "max"]
    assert book[1:] == [["12345", "Name 12345", "submitted", "late", "1", "0", "1", "3"],
                        ["alice", "Name alice", "submitted", "", "1", "0.4", "1.4", "3"],
                        ["4711", "Name 4711", "submitted", "", "1", "0.8", "1.8", "3"]]
    canvas = read_csv(tmp_path / "canvas.csv")   # Canvas's own gradebook export/import shape
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "lesson 5"]
    assert canvas[1] == ["Points Possible", "", "", "", "", "3"]
    assert canvas[2][:2] == ["Name 12345", "12345"] and canvas[3][1] == "" and canvas[2][-1] == "1"
    moodle = read_csv(tmp_path / "moodle.csv")   # the columns Moodle's grading worksheet import reads
    assert moodle[0] == ["Identifier", "Full name", "Email address", "Grade", "Maximum Grade",
                         "Last modified (grade)", "Feedback comments"]
    assert [r[0] for r in moodle[1:]] == ["Participant 12345", "Participant 4711"]   # only LMS ids
    assert moodle[2][3:5] == ["1.8", "3"] and "rms_norm: fail (0.8/2)" in moodle[2][6]
    import re
    assert re.fullmatch(r"[A-Z][a-z]+day, \d{1,2} [A-Z][a-z]+ \d{4}, \d{1,2}:\d\d [AP]M", moodle[1][5]), moodle[1][5]
    long = read_csv(tmp_path / "grades.csv")
    assert long[0] == ["student", "exercise", "status", "points", "max_points", "message"]
    assert long[2][5] == "'=HYPERLINK(\"x\")"   # no formula in any CSV


def test_merge_joins_every_shard_once(tmp_path, capsys):
    from llmlab.grading.outputs import write_reports

    students = ["alice", "bob", "carol", "12345"]
    for k, part in ((1, students[:2]), (2, students[2:])):
        run, rows = fake_run(part, shard=[k, 2])
        (tmp_path / f"s{k}" / "feedback").mkdir(parents=True)
        (tmp_path / f"s{k}" / "feedback" / f"{part[0]}.html").write_text("<p>fb</p>")
        write_reports(rows, tmp_path / f"s{k}", run)
    assert main(["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "all")]) == 0
    book = read_csv(tmp_path / "all" / "gradebook.csv")
    assert sorted(r[0] for r in book[1:]) == sorted(students)
    assert (tmp_path / "all" / "feedback" / "carol.html").exists()
    assert main(["merge", str(tmp_path / "s1"), "--out", str(tmp_path / "half")]) == 2
    assert "every shard 1/N to N/N exactly once" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "all")]) == 2
    assert "already exists and is not empty" in capsys.readouterr().err


def test_feedback_holds_one_student_and_no_paths_of_this_machine(tmp_path):
    from llmlab.grading.feedback import feedback_html, private_paths, safe_name, scrub

    paths = private_paths([tmp_path / "submissions"])
    site = next(p for p, label in paths if label == "<python>")
    rows = [{"student": "alice", "exercise": "softmax", "status": "fail", "points": 0.8, "max_points": 1,
             "message": f"raised <b>OSError: {tmp_path}/submissions/bob.ipynb</b> in {site}/torch/x.py and "
                        "/tmp/llmlab-grade-abc123/work"}]
    page = feedback_html({"student": "alice", "name": "Alice", "total": 0.8, "max": 1}, rows, "lesson", paths)
    assert "0.8 of 1 points" in page and "&lt;b&gt;" in page and "<b>OSError" not in page
    for private in (str(tmp_path), site, "/tmp/llmlab-grade"):
        assert private not in page
    assert "&lt;instructor&gt;/bob.ipynb" in page and "&lt;python&gt;/torch" in page
    assert scrub(str(Path.home() / "x"), paths) == "<home>/x"
    assert safe_name("alice") == "alice" and safe_name("=1+2").startswith("_1_2-") and "/" not in safe_name("../x")


def test_feedback_pages_in_chinese_translate_the_page_and_the_messages(tmp_path, monkeypatch):
    from llmlab.grading.feedback import feedback_html, private_paths

    paths = private_paths([tmp_path / "submissions"])
    rows = [{"student": "li", "exercise": "softmax", "status": "fail", "points": 0, "max_points": 2,
             "message": "softmax(x) returned shape (3,); expected shape (2, 3)."},
            {"student": "li", "exercise": "sdpa", "status": "error", "points": 0, "max_points": 3,
             "message": "the notebook did not finish within 120 s (cell 7 was still running); the check in cell 9 "
                        "never ran"},
            {"student": "li", "exercise": "rope", "status": "error", "points": 0, "max_points": 1,
             "message": "the check cell for 'rope' is missing from the submission (deleted or edited); no result"}]
    entry = {"student": "li", "name": "Li Lei", "total": 0, "max": 6, "late": True}
    page = feedback_html(entry, rows, "lesson 5", paths, "zh_CN")
    assert '<html lang="zh-CN">' in page and "<b>Li Lei</b> 的反馈：<b>得分 0 / 6</b>。" in page
    assert "这份提交被标记为迟交。" in page and "<th>练习</th>" in page and "尚未通过" in page and "出错" in page
    assert "softmax(x) 返回的形状是 (3,)，应为 (2, 3)。" in page                    # as check() says it to a learner
    assert "这个笔记本未能在 120 秒内运行完（单元格 7 仍在运行）；单元格 9 中的检查没有运行" in page
    assert "提交中缺少 &#x27;rope&#x27; 的检查单元格（被删除或改动）；没有结果" in page   # html-escaped quotes
    assert 'class="fail"' in page and "<code>softmax</code>" in page              # ids and classes stay
    english = feedback_html(entry, rows, "lesson 5", paths)
    assert "0 of 6 points" in english and "returned shape (3,)" in english and "尚未" not in english
    with pytest.raises(ValueError, match="'en', 'zh_CN'; got 'fr'"):
        feedback_html(entry, rows, "lesson 5", paths, "fr")
    # the command line passes --language on; without it, LLMLAB_LANGUAGE decides (grade reads it)
    seen = {}
    monkeypatch.setattr("llmlab.grading.grade.grade", lambda *a, **k: seen.update(k) or [])
    assert main(["grade", str(tmp_path), "--out", str(tmp_path / "o"), "--expected", "softmax",
                 "--language", "zh_CN"]) == 0 and seen["language"] == "zh_CN"
    with pytest.raises(SystemExit):
        main(["grade", str(tmp_path), "--out", str(tmp_path / "o"), "--expected", "softmax", "--language", "fr"])


def test_grade_refuses_an_out_folder_with_an_earlier_run(tmp_path, capsys):
    (tmp_path / "subs").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "subs" / "a.ipynb")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "grades.csv").write_text("student,exercise\nkeep,me\n")
    assert main(["grade", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--expected", "softmax",
                 "--unsafe-no-sandbox"]) == 2
    err = capsys.readouterr().err
    assert "already exists and is not empty (it holds an earlier grade run)" in err and "new folder" in err
    assert (tmp_path / "out" / "grades.csv").read_text() == "student,exercise\nkeep,me\n"
    assert main(["grade", str(tmp_path / "subs"), "--out", str(tmp_path / "o2"), "--expected", "softmax",
                 "--roster", str(tmp_path / "subs" / "a.ipynb"), "--unsafe-no-sandbox"]) == 2
    assert "roster" in capsys.readouterr().err and not (tmp_path / "o2").exists()


GUIDE = ROOT / "chapters" / "appendix_instructor.md"


def test_the_instructor_guide_runs_as_written(tmp_path, monkeypatch, capsys):
    """Every `$ llmlab ...` command of the guide, in order, in a fresh folder (the example class, the
    student copies, grading with a roster and 2 jobs, the LMS files), and what the guide says it gives."""
    import re
    import shlex
    monkeypatch.chdir(tmp_path)
    commands = re.findall(r"^\$ (llmlab .+)$", GUIDE.read_text(encoding="utf-8"), re.M)
    assert [c.split()[1] for c in commands][:3] == ["example", "assign", "grade"], commands
    for command in commands:
        assert main(shlex.split(command)[1:]) == 0, command
    printed = capsys.readouterr().out
    grade_args = shlex.split(next(c for c in commands if c.split()[1] == "grade"))
    report = Path(grade_args[grade_args.index("--out") + 1])
    text = GUIDE.read_text(encoding="utf-8")
    for name in ("gradebook.csv", "canvas.csv"):   # the files the guide shows are the ones grade wrote
        shown = re.search(r"\(`" + re.escape(f"{report}/{name}") + r"`[^\n]*:\n\n```text\n(.*?)```", text, re.S)
        assert shown, name
        assert shown.group(1) == (report / name).read_text(encoding="utf-8").replace("\r\n", "\n"), name
    table = re.search(r"```text\n(student  softmax .*?)```", text, re.S).group(1)
    assert table in "\n".join(line.rstrip() for line in printed.splitlines()) + "\n"
    book = {r["student"]: r for r in csv.DictReader(open(report / "gradebook.csv", newline="", encoding="utf-8"))}
    assert book["alice"]["total"] == "3" and book["bob"]["total"] == "0" and book["erin"]["status"] == "missing"
    # bit for bit: the gradebook writes points rounded to 3 decimals, so 4/5 is written "0.8" and read back as 0.8
    assert_same_bits(float(book["carol"]["total"]), 0.8)
    assert book["dan"]["softmax"] == "1"
    for name in ("canvas.csv", "moodle.csv", "feedback/alice.html", "feedback/alice.ipynb"):
        assert (report / name).exists(), name
    page = (report / "feedback" / "carol.html").read_text(encoding="utf-8")
    assert "0.8 of 3 points" in page and "wrong dimension" in page and "alice" not in page.lower()
    assert not (report / "feedback" / "erin.html").exists()          # she handed in nothing: no page
    assert "no page for the 1 on the roster who handed in nothing" in printed
    assert str(tmp_path) not in page
    executed = nbformat.read(report / "feedback" / "alice.ipynb", as_version=4)
    assert any(c.get("outputs") for c in executed.cells if c.cell_type == "code")
    assert "not on the roster" not in printed and "with 2 jobs" in printed


def test_models_the_assignment_loads_are_converted_once_before_grading(tmp_path, monkeypatch):
    """The offline models an assignment loads go into the cache before the first notebook, so the
    sandboxes (which read the cache read-only) never convert them again, one by one."""
    import llmlab.loading
    from llmlab.grading.grade import warm_model_cache

    loaded = []
    monkeypatch.setattr(llmlab.loading, "load", lambda name, *a, **k: loaded.append(name))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('model, tok = load("SmolLM2_135M")\nother = llmlab.load("smollm2-135m")'),
                nbformat.v4.new_markdown_cell('load("gemma3-270m") in prose is not code'),
                nbformat.v4.new_code_cell("x = load('my_own_file.gguf')")]
    nbformat.write(nb, tmp_path / "lesson.ipynb")
    assert warm_model_cache(tmp_path / "lesson.ipynb", verbose=False) == ["smollm2-135m"]
    assert loaded == ["smollm2-135m"]


def test_shards_of_a_class_merge_into_the_whole_class(tmp_path, capsys):
    """grade --shard K/N over a roster, then llmlab merge: every student once, the absent ones included,
    a student's older notebook superseded. (The notebooks are broken on purpose: no kernel is needed.)"""
    import os
    subs = tmp_path / "subs"
    for i, name in enumerate(["ann", "ben", "cat", "dov", "eve", "fay"]):
        (subs / name).mkdir(parents=True)
        (subs / name / "lesson.ipynb").write_text("not a notebook")
    (subs / "ann" / "old.ipynb").write_text("older, not a notebook either")
    os.utime(subs / "ann" / "old.ipynb", (1000, 1000))
    (tmp_path / "roster.csv").write_text("student,name\n" + "".join(f"{s},{s.title()}\n" for s in
                                         ["hal", "ben", "cat", "dov", "eve", "ann", "gus"]))   # no fay
    for k in (1, 2):
        assert main(["grade", str(subs), "--out", str(tmp_path / f"shard{k}"), "--expected", "softmax,rms_norm",
                     "--points", "rms_norm=2", "--roster", str(tmp_path / "roster.csv"), "--shard", f"{k}/2",
                     "--jobs", "1"]) == 0
    printed = capsys.readouterr().out
    assert "superseded: ann/old.ipynb" in printed and "not on the roster: fay/lesson.ipynb" in printed
    assert main(["merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"), "--out", str(tmp_path / "all")]) == 0
    book = read_csv(tmp_path / "all" / "gradebook.csv")
    assert [r[0] for r in book[1:]] == ["hal", "ben", "cat", "dov", "eve", "ann", "gus", "fay"]   # the roster's order
    status = {r[0]: r[2] for r in book[1:]}
    assert (status["gus"], status["hal"], status["fay"], status["ann"]) == ("missing", "missing", "not on roster",
                                                                           "submitted")
    assert all(r[-1] == "3" for r in book[1:])
    parts = [read_csv(tmp_path / f"shard{k}" / "gradebook.csv")[1:] for k in (1, 2)]
    assert parts[0] and parts[1] and len(parts[0]) + len(parts[1]) == 8
    assert main(["grade", str(subs), "--out", str(tmp_path / "x"), "--expected", "softmax", "--shard", "3/2"]) == 2
    assert "1 <= K <= N" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ cells grade skips

GRADED_CHAPTERS = [p for p in CHAPTERS if any(is_solution(c) for c in nbformat.read(p, as_version=4).cells)]


def test_cells_no_exercise_needs_are_skipped_and_the_rest_kept():
    """The rules of needed.py on a small notebook: what the exercise reads runs, in place changes
    and names read inside functions count, a changed or new cell always runs, tags decide."""
    from llmlab.grading.needed import cells_to_skip, key

    assigned = ["import math\nimport torch",                  # 0 read by the function
                "table = [1, 2]",                               # 1 read by the function...
                "table.append(3)",                              # 2 ...and changed in place
                "torch.manual_seed(0)\nslow = sum(range(10))",  # 3 a figure's work: no exercise reads it
                "def area(r):\n    raise NotImplementedError",  # 4 the stub
                "check('area', area)",                          # 5
                "plot = area(2)"]                               # 6 after the check, reads area: not needed
    solved = assigned[:4] + ["def area(r):\n    return math.pi * r * r * len(table)"] + assigned[5:]
    instructor = {key(s) for s in assigned}
    assert cells_to_skip(solved, instructor) == {3, 6}
    assert cells_to_skip(assigned, instructor) == {0, 1, 2, 3, 6}  # the untouched stub reads nothing
    assert cells_to_skip(solved, instructor, run_tagged={key(assigned[3])}) == {6}
    assert cells_to_skip(solved, instructor, skip_tagged={key(assigned[2])}) == {2, 3, 6}
    assert cells_to_skip(solved, set()) == set()                  # no assignment: every cell runs
    # a student's own cell runs, and so does what it reads; a name read by string makes every cell run
    assert cells_to_skip(solved[:4] + ["r = slow"] + solved[4:], instructor) == {7}
    assert cells_to_skip(solved + ["def f():\n    return globals()['slow']"], instructor) == set()
    assert cells_to_skip(["x = 1", "y = eval('x')", "check('a', f)"], {"x = 1", "y = eval('x')"}) == set()
    # a name the cell binds before it reads it needs no earlier cell; x += ... reads x first
    assert cells_to_skip(["x = [1]", "x = [2]\ny = x", "check('a', y)"], {"x = [1]", "x = [2]\ny = x"}) == {0}
    assert cells_to_skip(["x = [1]", "x += [2]\ny = x", "check('a', y)"], {"x = [1]", "x += [2]\ny = x"}) == set()
    # code the parser cannot read (nested too deep) runs, and so does every cell before it
    assert cells_to_skip(["x = 1", "z = 2", "y = " + "-" * 100000 + "1", "check('a', f)"], {"x = 1", "z = 2"}) == set()
    # a read at the top of a cell needs only the cells before it; a function's read needs them all
    assert cells_to_skip(["k = 2", "v = k", "k = 3", "check('a', v)"], {"k = 2", "v = k", "k = 3"}) == {2}
    assert cells_to_skip(["k = 2", "def f():\n    return k", "k = 3", "check('a', f)"],
                         {"k = 2", "def f():\n    return k", "k = 3"}) == set()


def _wrong_source(exercise: str):
    """A wrong solution of `exercise` from the exercise tests, as notebook source; None if none is self-contained."""
    import inspect

    from test_exercises import WRONG
    for ex, fn, _ in WRONG:
        if ex == exercise and fn.__qualname__ == fn.__name__ and not fn.__closure__:
            try:
                source = inspect.getsource(fn)
            except (OSError, TypeError):
                continue
            return fn.__name__, "import math\nimport torch\nimport torch.nn.functional as F\n\n" + source
    return None


@pytest.mark.slow
@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot make a sandbox here")
@pytest.mark.parametrize("path", GRADED_CHAPTERS, ids=lambda p: p.name)
def test_a_chapter_graded_without_its_unneeded_cells_keeps_every_verdict(path):
    """Graded against its student copy, a chapter skips the cells no exercise needs; its reference
    solutions still pass every exercise, and a wrong answer still fails."""
    from llmlab.grading.needed import NOT_RUN, instructor_cells

    source = nbformat.read(path, as_version=4)
    student, ids = student_copy(source)
    instructor = instructor_cells([student])
    sub = Submission(path.stem, path.name, nbformat.writes(source).encode("utf-8"))
    parse(sub)
    info = run_submission(sub, ids, timeout=600, instructor=instructor)
    assert info["status"] == "ok", info["detail"]
    assert info["skipped"], "every cell ran: the chapter's figures and measurements should not be needed"
    assert all(sub.notebook.cells[i].outputs[0]["text"] == NOT_RUN for i in info["skipped"])   # the kept notebook says so
    assert {ex: r.status for ex, r in info["results"].items()} == dict.fromkeys(ids, "pass"), \
        {ex: r.message for ex, r in info["results"].items()}

    wrong = next(((ex, w) for ex in ids if (w := _wrong_source(ex))), None)
    if wrong is None:
        return
    exercise, (name, text) = wrong
    nb = copy.deepcopy(source)
    check_cell = next(c for c in nb.cells if c.cell_type == "code" and exercise in check_ids(c.source))
    handed = re.search(r"""check\(\s*['"]%s['"]\s*,\s*(\w+)""" % re.escape(exercise), check_cell.source).group(1)
    index = max(i for i, c in enumerate(nb.cells[:nb.cells.index(check_cell)]) if is_solution(c))
    nb.cells[index].source = f"{text}\n{handed} = {name}\n"
    sub = Submission(path.stem, path.name, nbformat.writes(nb).encode("utf-8"))
    parse(sub)
    info = run_submission(sub, ids, timeout=600, instructor=instructor)
    got = {ex: r.status for ex, r in info["results"].items()}
    assert got.pop(exercise) == "fail", info["results"][exercise].message
    assert got == dict.fromkeys([i for i in ids if i != exercise], "pass")
