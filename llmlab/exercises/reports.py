"""The grade rows of `llmlab grade` and the files they are written to.

One row per student and expected exercise, always one of four statuses; when an exercise has no
result, the row says why (the check cell was deleted, an earlier cell failed, the run timed out).
grades.csv (cells escaped against spreadsheet formulas) and grades.json are written atomically.

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

from llmlab.exercises.assign import check_ids
from llmlab.exercises.submissions import Submission, cell_label

STATUSES = ("pass", "fail", "not-attempted", "error")


def rows_for(sub: Submission, info: dict | None, expected: list[str]) -> list[dict]:
    """The grade rows of one submission: one per expected exercise, always a known status."""
    rows = []
    for ex in expected:
        result = (info or {}).get("results", {}).get(ex)
        if result is not None and result.status in STATUSES:
            rows.append({"student": sub.student, "exercise": ex, "status": result.status, "message": result.message})
        else:
            rows.append({"student": sub.student, "exercise": ex, "status": "error", "message": _why_missing(ex, sub, info)})
    return rows


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


def write_reports(rows: list[dict], out_dir: Path) -> dict:
    """Write grades.csv and grades.json atomically (temporary file + rename); return their SHA-256."""
    out_dir.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=["student", "exercise", "status", "message"])
    writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
    files = {"grades.csv": buffer.getvalue().encode("utf-8"),
             "grades.json": (json.dumps(rows, indent=1, ensure_ascii=False) + "\n").encode("utf-8")}
    for name, data in files.items():
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out_dir)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, out_dir / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


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
