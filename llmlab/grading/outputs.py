"""The files of a grade run, written into a new folder, and `llmlab merge` for shards.

    grades.csv, grades.json  the rows (long: one row per student and exercise)
    gradebook.csv            one row per student: points per exercise, total, max
    canvas.csv, moodle.csv,  the shapes Canvas and Moodle import (lms.py)
    moodle_gradebook.csv
    run.json                 what was graded: exercises, points, students; `llmlab merge` reads it
    feedback/                a page per student who handed in a notebook (feedback.py), written by grade.py

Every file is written atomically (reports.write_atomically). An --out folder that already holds
files is refused, so an earlier run is never overwritten.
"""
from __future__ import annotations

import json
from pathlib import Path

from llmlab.grading.lms import canvas_csv, moodle_csv, moodle_gradebook_csv
from llmlab.grading.reports import LONG_COLUMNS, csv_bytes, gradebook, gradebook_csv, summary_table, write_atomically


def prepare_out(out_dir: Path, inputs: list[Path]) -> Path:
    """The report folder: new or empty, and outside every input folder. An earlier run is never
    overwritten: grade refuses and says so."""
    for folder in inputs:
        if out_dir.resolve() == folder.resolve() or folder.resolve() in out_dir.resolve().parents:
            raise ValueError(f"--out must not be inside {folder}: grade never writes there.")
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        earlier = " (it holds an earlier grade run)" if (out_dir / "run.json").exists() or \
            (out_dir / "grades.csv").exists() else ""
        raise ValueError(f"--out {out_dir} already exists and is not empty{earlier}. grade never overwrites "
                         "reports: pass a new folder (e.g. with the date in its name), or move the old one away.")
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def write_reports(rows: list[dict], out_dir: Path, run: dict) -> dict[str, str]:
    """Write every report file of a run (see the module docstring); return their SHA-256."""
    book = gradebook(run, rows)
    files = {"grades.csv": csv_bytes(LONG_COLUMNS, [[r[c] for c in LONG_COLUMNS] for r in rows]),
             "grades.json": (json.dumps(rows, indent=1, ensure_ascii=False) + "\n").encode("utf-8"),
             "gradebook.csv": gradebook_csv(book, run["exercises"]),
             "canvas.csv": canvas_csv(book, run),
             "moodle.csv": moodle_csv(book, run, rows),
             "moodle_gradebook.csv": moodle_gradebook_csv(book, run, rows),
             "run.json": (json.dumps(run, indent=1, ensure_ascii=False) + "\n").encode("utf-8")}
    return write_atomically(out_dir, files)


# ---------------------------------------------------------------------------------------------- shards

def merge(report_dirs: list, out_dir, verbose: bool = True) -> dict[str, str]:
    """Merge the reports of `llmlab grade --shard K/N` runs into one set of files in out_dir."""
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
    in_order = sorted(students, key=lambda s: (s.get("roster_line") is None, s.get("roster_line") or 0, s["student"]))
    run = {**first, "students": in_order, "shard": None,
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
