"""`llmlab grade`: run every submitted notebook and collect the results of its checks.

Each submission is copied into a fresh temporary folder and executed there, top to bottom, by a
separate Jupyter kernel (nbclient, kernel "python3"), under a wall-clock limit for the whole
notebook. Cells that raise do not stop the run (each check cell still gets its chance). Every
check() appends a JSON line to the file named by $LLMLAB_GRADE_REPORT, which is set for the
kernel; those lines become the grades. The submissions folder is only read.

Student = the notebook's file stem. Status per exercise: pass / fail / not-attempted / error, where
error means the check produced no result (the notebook is not valid JSON, timed out, its kernel
died, the check cell raised, or the check cell was deleted).

Not a sandbox: submitted code runs with your permissions. Grade in a container or a throw-away
account when you do not trust the submissions.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import nbformat

from llmlab.exercises.assign import check_ids, declared_exercises, notebook_paths

STATUSES = ("pass", "fail", "not-attempted", "error")


def expected_exercises(expected: list[str] | None = None, assignment=None) -> list[str]:
    """Exercise ids from an explicit list and/or the assigned notebooks (file or folder)."""
    ids = list(expected or [])
    if assignment:
        for path in notebook_paths([assignment]):
            nb = nbformat.read(path, as_version=4)
            meta = nb.metadata.get("llmlab", {}).get("exercises") or []
            for i in list(meta) + declared_exercises(nb):
                if i not in ids:
                    ids.append(i)
    return ids


def execute_notebook(path: Path, timeout: float, kernel: str = "python3") -> dict:
    """Run a copy of the notebook at `path` in a temporary folder. Returns
    {"status": "ok" | "unreadable" | "timeout" | "dead-kernel" | "failed", "detail": str,
     "reports": [json lines], "cell_errors": {cell index: "Name: value"}, "stopped_at": index or None,
     "notebook": the notebook as read or None, "seconds": wall time}."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    start = time.perf_counter()
    info = {"status": "ok", "detail": "", "reports": [], "cell_errors": {}, "stopped_at": None, "notebook": None}
    try:
        nb = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
    except Exception as e:  # not JSON, not a notebook, not UTF-8
        info.update(status="unreadable", detail=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        info["seconds"] = time.perf_counter() - start
        return info
    info["notebook"] = nb
    workdir = Path(tempfile.mkdtemp(prefix="llmlab-grade-"))
    report = workdir / "checks.jsonl"
    env = dict(os.environ, LLMLAB_GRADE_REPORT=str(report), PYTHONPATH=_pythonpath(), MPLBACKEND="Agg")
    deadline = time.monotonic() + timeout
    state = {"cell": None}

    def on_cell_start(cell, cell_index, **kw):
        state["cell"] = cell_index

    client = NotebookClient(
        nb, kernel_name=kernel, allow_errors=True, startup_timeout=max(30, int(timeout)),
        timeout_func=lambda cell: max(1, int(deadline - time.monotonic())), interrupt_on_timeout=False,
        resources={"metadata": {"path": str(workdir)}}, on_cell_start=on_cell_start, record_timing=False)
    try:
        # the kernel's own stderr only carries start-up warnings; cell output comes over ZMQ
        client.execute(env=env, stderr=subprocess.DEVNULL)
    except CellTimeoutError:
        info.update(status="timeout", stopped_at=state["cell"],
                    detail=f"did not finish within {timeout:g} s (cell {_label(state['cell'])} was still running)")
    except DeadKernelError as e:
        info.update(status="dead-kernel", stopped_at=state["cell"],
                    detail=f"the kernel died in cell {_label(state['cell'])} ({e})")
    except Exception as e:  # kernel did not start, broken notebook structure, ...
        info.update(status="failed", stopped_at=state["cell"], detail=f"{type(e).__name__}: {e}")
    finally:
        if report.exists():
            for line in report.read_text(encoding="utf-8").splitlines():
                try:
                    info["reports"].append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        shutil.rmtree(workdir, ignore_errors=True)
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "error":
                info["cell_errors"][index] = f"{out.get('ename')}: {out.get('evalue')}"
                break
    info["seconds"] = time.perf_counter() - start
    return info


def _label(index) -> str:
    return "?" if index is None else str(index + 1)  # cells counted from 1, as an instructor reads them


def _pythonpath() -> str:
    """Make the kernel import this same llmlab (also when it is not pip-installed)."""
    root = str(Path(__file__).resolve().parents[2])
    rest = os.environ.get("PYTHONPATH")
    return root + (os.pathsep + rest if rest else "")


def rows_for(student: str, info: dict, expected: list[str]) -> list[dict]:
    """The grade rows of one submission."""
    nb = info["notebook"]
    explicit = bool(expected)
    if not explicit and nb is not None:  # fall back to what the notebook itself declares
        expected = list(nb.metadata.get("llmlab", {}).get("exercises") or declared_exercises(nb))
    reported = {}
    for line in info["reports"]:
        reported[str(line.get("exercise"))] = line  # the last report of an exercise counts
    ids = list(expected or []) + ([] if explicit else [i for i in reported if i not in (expected or [])])
    if not ids:
        message = _notebook_problem(info) or "no exercise checks found in this notebook"
        return [{"student": student, "exercise": "", "status": "error", "message": message}]
    rows = []
    for ex in ids:
        if ex in reported:
            line = reported[ex]
            status = line.get("status") if line.get("status") in STATUSES else ("pass" if line.get("passed") else "fail")
            rows.append({"student": student, "exercise": ex, "status": status, "message": str(line.get("message", ""))})
        else:
            rows.append({"student": student, "exercise": ex, "status": "error", "message": _why_missing(ex, info)})
    return rows


def _notebook_problem(info: dict) -> str:
    if info["status"] == "unreadable":
        return f"not a valid notebook file ({info['detail']})"
    if info["status"] in ("timeout", "dead-kernel", "failed"):
        return f"the notebook {info['detail']}" if info["status"] == "timeout" else info["detail"]
    return ""


def _why_missing(ex: str, info: dict) -> str:
    """Why exercise `ex` has no result."""
    if info["status"] == "unreadable":
        return f"not a valid notebook file ({info['detail']}); nothing could be run"
    cells = [i for i, c in enumerate(info["notebook"].cells) if c.cell_type == "code" and ex in check_ids(c.source)]
    if not cells:
        return f"the check cell for '{ex}' is missing from the submission (deleted or edited); no result"
    cell = cells[0]
    stopped = info["stopped_at"]
    if info["status"] == "timeout" and (stopped is None or stopped <= cell):
        return f"the notebook {info['detail']}; the check in cell {_label(cell)} never ran"
    if info["status"] in ("dead-kernel", "failed") and (stopped is None or stopped <= cell):
        return f"{info['detail']}; the check in cell {_label(cell)} never ran"
    if cell in info["cell_errors"]:
        return f"the check cell (cell {_label(cell)}) raised {info['cell_errors'][cell]}"
    earlier = [i for i in info["cell_errors"] if i < cell]
    if earlier:
        return (f"the check in cell {_label(cell)} reported no result; the first error was in cell "
                f"{_label(earlier[0])}: {info['cell_errors'][earlier[0]]}")
    return f"the check in cell {_label(cell)} reported no result (was check() replaced or redefined?)"


def grade(submissions, out_dir, timeout: float = 120, expected: list[str] | None = None, assignment=None,
          kernel: str = "python3", verbose: bool = True) -> list[dict]:
    """Grade every *.ipynb in `submissions`; write grades.csv and grades.json into out_dir; return the rows."""
    submissions, out_dir = Path(submissions), Path(out_dir)
    if not submissions.is_dir():
        raise FileNotFoundError(f"{submissions} is not a folder. Pass the folder that holds the submitted .ipynb files.")
    paths = sorted(p for p in submissions.glob("*.ipynb") if not p.name.startswith("."))
    if not paths:
        raise FileNotFoundError(f"no .ipynb files in {submissions}.")
    if out_dir.resolve() == submissions.resolve():
        raise ValueError("--out must not be the submissions folder: grade never writes into the submissions.")
    ids = expected_exercises(expected, assignment)
    rows = []
    for path in paths:
        if verbose:
            print(f"grading {path.name} ...", end=" ", flush=True)
        try:
            info = execute_notebook(path, timeout, kernel)
            student_rows = rows_for(path.stem, info, ids)
        except Exception as e:  # one bad file never stops the run
            info = {"status": "failed", "seconds": 0.0}
            student_rows = [{"student": path.stem, "exercise": ex, "status": "error",
                             "message": f"grading failed: {type(e).__name__}: {e}"} for ex in (ids or [""])]
        rows += student_rows
        if verbose:
            passed = sum(r["status"] == "pass" for r in student_rows)
            print(f"{passed}/{len(student_rows)} passed ({info['status']}, {info['seconds']:.1f} s)")
    write_reports(rows, out_dir)
    if verbose:
        print()
        print(summary_table(rows))
        print(f"\nwrote {out_dir / 'grades.csv'} and {out_dir / 'grades.json'}")
    return rows


def write_reports(rows: list[dict], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "grades.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["student", "exercise", "status", "message"])
        writer.writeheader()
        writer.writerows(rows)
    (out_dir / "grades.json").write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def summary_table(rows: list[dict]) -> str:
    """One line per student: the status of each exercise and the number passed."""
    students = list(dict.fromkeys(r["student"] for r in rows))
    exercises = list(dict.fromkeys(r["exercise"] for r in rows))
    cell = {(r["student"], r["exercise"]): r["status"] for r in rows}
    names = [e or "(notebook)" for e in exercises]
    widths = [max(len("student"), *(len(s) for s in students))] + [max(len(n), 13) for n in names]
    header = ["student"] + names + ["passed"]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths + [6]))]
    for s in students:
        statuses = [cell.get((s, e), "") for e in exercises]
        passed = f"{statuses.count('pass')}/{sum(1 for e in exercises if (s, e) in cell)}"
        lines.append("  ".join(v.ljust(w) for v, w in zip([s] + statuses + [passed], widths + [6])))
    return "\n".join(lines)
