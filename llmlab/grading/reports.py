"""The grade rows of `llmlab grade` and the files they are written to.

One row per student and expected exercise, always one of five statuses (pass, fail, not-attempted,
error, and missing for a student on the roster who handed nothing in); when an exercise has no
result, the row says why (the check cell was deleted, an earlier cell failed, the run timed out).
Each row carries the points earned and the exercise's maximum. The files, each written atomically:

    grades.csv, grades.json  the rows (long: one row per student and exercise)
    gradebook.csv            one row per student: points per exercise, total, max
    canvas.csv, moodle.csv,  the shapes Canvas and Moodle import (lms.py)
    moodle_gradebook.csv
    run.json                 what was graded: exercises, points, students; `llmlab merge` reads it

>>> csv_cell("=SUM(A1)")
"'=SUM(A1)"
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

from llmlab.grading.assign import check_ids
from llmlab.grading.submissions import Submission, cell_label

STATUSES = ("pass", "fail", "not-attempted", "error", "missing")
LONG_COLUMNS = ["student", "exercise", "status", "points", "max_points", "message"]


def number(x: float):
    """Points as a person writes them: 1 rather than 1.0, at most 3 decimals."""
    x = round(float(x), 3)
    return int(x) if x == int(x) else x


def rows_for(sub: Submission, info: dict | None, expected: list[str], points: dict) -> list[dict]:
    """The grade rows of one submission: one per expected exercise, always a known status."""
    rows = []
    for ex in expected:
        result = (info or {}).get("results", {}).get(ex)
        if result is not None and result.status in STATUSES[:4]:
            status, message, score = result.status, result.message, result.score
        else:
            status, message, score = "error", _why_missing(ex, sub, info), 0.0
        rows.append({"student": sub.student, "exercise": ex, "status": status,
                     "points": number(points[ex] * score), "max_points": number(points[ex]), "message": message})
    return rows


def missing_rows(student: str, expected: list[str], points: dict) -> list[dict]:
    """The rows of a student on the roster who handed nothing in."""
    return [{"student": student, "exercise": ex, "status": "missing", "points": 0, "max_points": number(points[ex]),
             "message": "no submission from this student"} for ex in expected]


def _why_missing(ex: str, sub: Submission, info: dict | None) -> str:
    """Why exercise `ex` has no result."""
    if sub.problem:
        return sub.problem + ("; nothing could be run" if sub.problem.startswith("not a valid") else "")
    cells = [i for i, c in enumerate(sub.notebook.cells) if c.cell_type == "code" and ex in check_ids(c.source)]
    if not cells:
        return f"the check cell for '{ex}' is missing from the submission (deleted or edited); no result"
    cell = cells[0]
    stopped = info["stopped_at"]
    if info["status"] == "timeout" and (stopped is None or stopped <= cell):
        return f"the notebook {info['detail']}; the check in cell {cell_label(cell)} never ran"
    if info["status"] in ("dead-kernel", "failed") and (stopped is None or stopped <= cell):
        return f"{info['detail']}; the check in cell {cell_label(cell)} never ran"
    if cell in sub.cell_errors:
        return f"the check cell (cell {cell_label(cell)}) raised {sub.cell_errors[cell]}"
    earlier = [i for i in sub.cell_errors if i < cell]
    if earlier:
        return (f"the check in cell {cell_label(cell)} handed no function to the grader; the first error was in cell "
                f"{cell_label(earlier[0])}: {sub.cell_errors[earlier[0]]}")
    return (f"the check in cell {cell_label(cell)} handed no function to the grader (was check() from "
            "llmlab.exercises replaced or redefined?)")


def csv_cell(value) -> str:
    """A cell that a spreadsheet shows as text: a leading =, +, -, @, tab or CR would start a formula."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def csv_bytes(header: list[str], rows: list[list]) -> bytes:
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow([csv_cell(h) for h in header])
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    return buffer.getvalue().encode("utf-8")


def gradebook(run: dict, rows: list[dict]) -> list[dict]:
    """One entry per student (run["students"] order): points per exercise, total, max, status, name, late."""
    got = {(r["student"], r["exercise"]): r["points"] for r in rows}
    out = []
    for s in run["students"]:
        points = {ex: number(got.get((s["student"], ex), 0)) for ex in run["exercises"]}
        out.append({**s, "by_exercise": points, "total": number(sum(points.values())),
                    "max": number(sum(run["points"].values()))})
    return out


def gradebook_csv(book: list[dict], exercises: list[str]) -> bytes:
    header = ["student", "name", "status", "late"] + exercises + ["total", "max"]
    return csv_bytes(header, [[b["student"], b["name"], b["status"], "late" if b.get("late") else ""]
                              + [b["by_exercise"][ex] for ex in exercises] + [b["total"], b["max"]] for b in book])


def write_atomically(out_dir: Path, files: dict[str, bytes]) -> dict[str, str]:
    """Write each file to a temporary name and rename it; return the SHA-256 of each."""
    for name, data in files.items():
        target = out_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


def write_reports(rows: list[dict], out_dir: Path, run: dict) -> dict[str, str]:
    """Write every report file of a run (see the module docstring); return their SHA-256."""
    from llmlab.grading.lms import canvas_csv, moodle_csv, moodle_gradebook_csv

    book = gradebook(run, rows)
    files = {"grades.csv": csv_bytes(LONG_COLUMNS, [[r[c] for c in LONG_COLUMNS] for r in rows]),
             "grades.json": (json.dumps(rows, indent=1, ensure_ascii=False) + "\n").encode("utf-8"),
             "gradebook.csv": gradebook_csv(book, run["exercises"]),
             "canvas.csv": canvas_csv(book, run),
             "moodle.csv": moodle_csv(book, run, rows),
             "moodle_gradebook.csv": moodle_gradebook_csv(book, run, rows),
             "run.json": (json.dumps(run, indent=1, ensure_ascii=False) + "\n").encode("utf-8")}
    return write_atomically(out_dir, files)


def summary_table(rows: list[dict]) -> str:
    """One line per student: the status of each exercise, and points out of the maximum."""
    students = list(dict.fromkeys(r["student"] for r in rows))
    exercises = list(dict.fromkeys(r["exercise"] for r in rows))
    cell = {(r["student"], r["exercise"]): r for r in rows}
    widths = [max(len("student"), *(len(s) for s in students))] + [max(len(e), 13) for e in exercises]
    lines = ["  ".join(h.ljust(w) for h, w in zip(["student"] + exercises + ["points"], widths + [6]))]
    for s in students:
        mine = [cell[(s, e)] for e in exercises if (s, e) in cell]
        score = f"{number(sum(r['points'] for r in mine))}/{number(sum(r['max_points'] for r in mine))}"
        statuses = [cell[(s, e)]["status"] if (s, e) in cell else "" for e in exercises]
        lines.append("  ".join(v.ljust(w) for v, w in zip([s] + statuses + [score], widths + [6])))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- shards

def merge(report_dirs: list, out_dir, verbose: bool = True) -> dict[str, str]:
    """Merge the reports of `llmlab grade --shard K/N` runs into one set of files in out_dir."""
    from llmlab.grading.grade import prepare_out

    runs, rows = [], []
    for folder in map(Path, report_dirs):
        try:
            runs.append(json.loads((folder / "run.json").read_text(encoding="utf-8")))
            rows += json.loads((folder / "grades.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(f"{folder} does not hold a grade run that can be merged ({type(e).__name__}: {e}). "
                             "Pass the --out folders of the `llmlab grade --shard K/N` runs.") from None
    if not runs:
        raise ValueError("name the report folders to merge: llmlab merge REPORT1 REPORT2 ... --out MERGED")
    first = runs[0]
    for folder, run in zip(report_dirs, runs):
        if (run["exercises"], run["points"], run.get("title")) != (first["exercises"], first["points"], first.get("title")):
            raise ValueError(f"{folder} graded other exercises or points than {report_dirs[0]}: "
                             "only shards of one grade run can be merged.")
    shards = sorted(tuple(r["shard"]) for r in runs if r.get("shard"))
    n = first["shard"][1] if first.get("shard") else None
    if n is None or shards != [(k, n) for k in range(1, n + 1)]:
        raise ValueError(f"the folders hold shards {shards or 'none'}; a merge needs every shard 1/N to N/N exactly "
                         "once (a shard missing or given twice would lose or double students).")
    students = [s for run in runs for s in run["students"]]
    keys = [s["student"] for s in students]
    if len(set(keys)) != len(keys):
        raise ValueError("a student appears in two shards: these runs did not split one class.")
    out_dir = prepare_out(Path(out_dir), [])
    run = {**first, "students": sorted(students, key=lambda s: s["student"]), "shard": None,
           "merged_from": [str(Path(d)) for d in report_dirs]}
    order = {s["student"]: i for i, s in enumerate(run["students"])}
    rows.sort(key=lambda r: (order[r["student"]], first["exercises"].index(r["exercise"])))
    digests = write_reports(rows, out_dir, run)
    for folder in map(Path, report_dirs):   # the feedback files come along
        for path in sorted((folder / "feedback").glob("*")) if (folder / "feedback").is_dir() else []:
            digests[f"feedback/{path.name}"] = write_atomically(out_dir, {f"feedback/{path.name}": path.read_bytes()}) \
                [f"feedback/{path.name}"]
    if verbose:
        print(f"merged {len(runs)} shards, {len(students)} students, into {out_dir}")
        print(summary_table(rows))
    return digests
