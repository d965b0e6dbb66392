"""The grade rows of `llmlab grade` and the files they are written to.

One row per student and expected exercise, always one of five statuses (pass, fail, not-attempted,
error, and missing for a student on the roster who handed nothing in); when an exercise has no
result, the row says why (the check cell was deleted, an earlier cell failed, the run timed out).
Each row carries the points earned and the exercise's maximum. This module turns rows into the
long CSV and the wide gradebook (one row per student); outputs.py writes every file of a run.

>>> csv_cell("=SUM(A1)")
"'=SUM(A1)"
"""
from __future__ import annotations

import csv
import hashlib
import io
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
