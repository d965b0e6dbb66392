"""The submissions `llmlab grade` reads, whose they are, and the exercises it is told to grade.

Every *.ipynb under the submissions folder (at any depth) is read into memory before any code
runs; a symbolic link, a non-file or an oversized file gets a problem instead of data, and so does
a file that is not a valid notebook. Whose a notebook is comes from where it lies:

    alice.ipynb                                      -> alice (a flat folder: the file name)
    alice/05_self_attention.ipynb                    -> alice (a folder per student)
    alicesmith_12345_67890_05_self_attention.ipynb   -> 12345 (Canvas: user id 12345, name alicesmith)
    alicesmith_LATE_12345_67890_05_self_attention.ipynb  -> 12345, marked late
    Alice Smith_12345_assignsubmission_file_/05.ipynb    -> 12345 (Moodle: participant 12345)
    Alice Smith_12345_assignsubmission_file_05.ipynb     -> 12345 (the same, downloaded without folders)

>>> identify("alicesmith_LATE_12345_67890_05_self_attention.ipynb")
{'student': '12345', 'name': 'alicesmith', 'lms': 'canvas', 'late': True, 'order': 67890}

A student with several notebooks gets one graded: the newest file (modification time; on a tie the
larger Canvas submission number, then the later path). The others are listed as superseded. The
exercise ids come from the instructor, never from a submission.
"""
from __future__ import annotations

import csv
import hashlib
import os
import re
import stat
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from llmlab.grading.assign import declared_exercises, notebook_paths

MAX_NOTEBOOK_BYTES = 50 * 2**20
CANVAS = re.compile(r"^(?P<name>[^_]+)(?P<late>_late)?_(?P<id>\d+)_(?P<order>\d+)_(?P<file>.+)$", re.I)
MOODLE = re.compile(r"^(?P<name>.+)_(?P<id>\d+)_assignsubmission_[a-z]+_(?P<file>.*)$", re.I)
ROSTER_COLUMNS = ("student", "name", "email", "section", "sis_user_id", "sis_login_id")


@dataclass
class Submission:
    """One handed-in notebook: whose it is, its bytes, then the parsed notebook, or the problem that stops it."""
    student: str               # the key of every row: an LMS id where the file name has one, else the name
    path: str                  # where it lies, relative to the submissions folder
    data: bytes | None = None
    problem: str = ""          # why it cannot be run ("" when it can)
    notebook: object = None
    cell_errors: dict = field(default_factory=dict)
    name: str = ""             # the name to show (from the LMS file name or the roster)
    lms: str = ""              # "canvas", "moodle" or ""
    late: bool = False         # Canvas marked the upload late
    order: int = 0             # Canvas submission number: breaks a tie between two uploads
    mtime: float = 0.0


def identify(relpath: str) -> dict:
    """Whose notebook this is, from its path relative to the submissions folder (see the module docstring)."""
    parts = Path(relpath).parts
    for part in parts[:-1] + (parts[-1] if len(parts) == 1 else "",):   # a folder, or a file of a flat download
        m = MOODLE.match(part)
        if m:
            return {"student": m["id"], "name": m["name"], "lms": "moodle", "late": False, "order": 0}
    m = CANVAS.match(parts[-1])
    if m and len(parts) == 1:
        return {"student": m["id"], "name": m["name"], "lms": "canvas", "late": bool(m["late"]), "order": int(m["order"])}
    student = parts[0] if len(parts) > 1 else parts[-1][:-len(".ipynb")]
    return {"student": student, "name": student, "lms": "", "late": False, "order": 0}


def collect(folder: Path) -> list[Submission]:
    """Every *.ipynb (any case) under `folder`, read into memory; symlinks and non-files get a problem.
    Hidden files and folders are skipped, and folders are never followed through a link."""
    subs = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        named = [d for d in dirs if d.lower().endswith(".ipynb")]   # a folder named like a notebook
        dirs[:] = [d for d in dirs if d not in named]
        for entry in sorted(files + named):
            if entry.startswith(".") or not entry.lower().endswith(".ipynb"):
                continue
            path = Path(top) / entry
            relpath = path.relative_to(folder).as_posix()
            sub = Submission(path=relpath, **identify(relpath))
            _read(sub, path)
            subs.append(sub)
    return subs


def _read(sub: Submission, path: Path) -> None:
    info = os.lstat(path)
    sub.mtime = info.st_mtime
    if stat.S_ISLNK(info.st_mode):
        sub.problem = "refused: the submission is a symbolic link, not a notebook file (hand in the file itself)"
    elif not stat.S_ISREG(info.st_mode):
        sub.problem = "refused: the submission is not a regular file"
    elif info.st_size > MAX_NOTEBOOK_BYTES:
        sub.problem = f"refused: {info.st_size / 2**20:.0f} MiB is larger than any notebook should be"
    else:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as f:
                sub.data = f.read(MAX_NOTEBOOK_BYTES + 1)
        except OSError as e:
            sub.problem = f"could not be read ({e.strerror})"


def newest_per_student(subs: list[Submission]) -> tuple[list[Submission], list[Submission]]:
    """(the one notebook graded per student, the superseded ones). The rule: a file that can be read
    beats one that cannot; then the newest modification time; then the larger Canvas submission
    number; then the later path."""
    best: dict[str, Submission] = {}
    for sub in subs:
        rank = (not sub.problem, sub.mtime, sub.order, sub.path)
        held = best.get(sub.student)
        if held is None or rank > (not held.problem, held.mtime, held.order, held.path):
            best[sub.student] = sub
    kept = [s for s in subs if best[s.student] is s]
    return kept, [s for s in subs if best[s.student] is not s]


def parse(sub: Submission) -> None:
    """Turn the bytes into a validated notebook, or set sub.problem to what is wrong."""
    if sub.problem:
        return
    try:
        with warnings.catch_warnings():  # cells without ids (older nbformat) are fine to run
            warnings.simplefilter("ignore")
            nb = nbformat.reads(sub.data.decode("utf-8"), as_version=4)
            nbformat.validate(nb)
    except nbformat.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path)
        what = e.message if len(e.message) < 200 else e.message[:200] + " ..."
        sub.problem = f"not a valid notebook file (at {where or 'the top level'}: {what})"
        return
    except UnicodeDecodeError:
        sub.problem = "not a valid notebook file (not UTF-8 text)"
        return
    except Exception as e:  # not JSON, not a notebook
        first = str(e).splitlines()[0] if str(e) else ""
        sub.problem = f"not a valid notebook file ({type(e).__name__}: {first[:200]})"
        return
    sub.notebook = nb


# ---------------------------------------------------------------------------------------------- roster

def read_roster(path) -> list[dict]:
    """The class list: a CSV with a `student` column (the name, folder name, Canvas user id or Moodle
    participant id a submission maps to) and optionally name, email, section, sis_user_id, sis_login_id."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            columns = [c.strip().lower() for c in reader.fieldnames or []]
            unknown = [c for c in columns if c not in ROSTER_COLUMNS]
            if "student" not in columns or unknown:
                said = f"columns {unknown} that llmlab does not know" if unknown else "no `student` column"
                raise ValueError(f"the roster {path} has {said}. A roster is a CSV whose columns are among "
                                 f"{', '.join(ROSTER_COLUMNS)}, with `student` required. Rename or delete the "
                                 "other columns (nothing was graded).")
            entries, seen = [], {}
            for line, row in enumerate(reader, start=2):
                entry = {c: (row.get(k) or "").strip() for c, k in zip(columns, reader.fieldnames)}
                key = entry["student"].lower()
                if not key:
                    raise ValueError(f"the roster {path}, line {line}: the `student` cell is empty. Fill it in "
                                     "or delete the line (nothing was graded).")
                if key in seen:
                    raise ValueError(f"the roster {path} lists student {entry['student']!r} twice (lines "
                                     f"{seen[key]} and {line}). Keep one line per student (nothing was graded).")
                seen[key] = line
                entries.append(entry)
    except UnicodeDecodeError:
        raise ValueError(f"the roster {path} is not UTF-8 text. Save it as CSV UTF-8 (nothing was graded).") from None
    return entries


def match_roster(subs: list[Submission], roster: list[dict]) -> tuple[list[dict], list[Submission]]:
    """Give each submission its roster spelling and name; return (roster entries with no submission,
    submissions whose student is not on the roster)."""
    by_key = {e["student"].lower(): e for e in roster}
    found, unknown = set(), []
    for sub in subs:
        entry = by_key.get(sub.student.lower()) or by_key.get(sub.name.lower())
        if entry is None:
            unknown.append(sub)
            continue
        sub.student, sub.name = entry["student"], entry.get("name") or sub.name
        found.add(entry["student"].lower())
    return [e for e in roster if e["student"].lower() not in found], unknown


def in_shard(student: str, shard: tuple[int, int] | None) -> bool:
    """True when `student` belongs to shard K of N (K from 1): a split by a hash of the student key, so
    it stays the same from run to run and machine to machine."""
    if shard is None:
        return True
    k, n = shard
    return int.from_bytes(hashlib.sha256(student.encode("utf-8")).digest()[:8], "big") % n == k - 1


# ---------------------------------------------------------------------------------------------- exercises

def expected_exercises(expected: list[str] | None = None, assignment=None) -> list[str]:
    """Exercise ids from the instructor: an explicit list and/or the assigned notebooks (file or folder)."""
    from llmlab.exercises.registry import BY_ID

    ids = list(expected or [])
    if assignment:
        for path in notebook_paths([assignment]):
            nb = nbformat.read(path, as_version=4)
            meta = nb.metadata.get("llmlab", {}).get("exercises") or []
            for i in list(meta) + declared_exercises(nb):
                if i not in ids:
                    ids.append(i)
    unknown = [i for i in ids if i not in BY_ID]
    if unknown:
        raise ValueError(f"unknown exercise ids {unknown}; `llmlab exercises` lists the known ones.")
    return ids


def exercise_points(ids: list[str], assignment=None, given: dict | None = None) -> dict[str, float]:
    """Points per exercise: the registry's (default 1), then the assigned notebooks' metadata
    (metadata.llmlab.points = {"softmax": 2}), then `given` (the --points option)."""
    from llmlab.exercises.registry import BY_ID

    points = {i: float(BY_ID[i].points) for i in ids}
    for path in notebook_paths([assignment]) if assignment else []:
        meta = nbformat.read(path, as_version=4).metadata.get("llmlab", {}).get("points") or {}
        points.update({i: float(p) for i, p in meta.items() if i in points})
    for i, p in (given or {}).items():
        if i not in points:
            raise ValueError(f"--points names {i!r}, which is not an exercise of this assignment ({', '.join(ids)}).")
        points[i] = float(p)
    bad = {i: p for i, p in points.items() if not p >= 0}
    if bad:
        raise ValueError(f"points must be 0 or more; got {bad}.")
    return points


def cell_label(index) -> str:
    """A cell index as the instructor counts cells (from 1); "?" when unknown."""
    return "?" if index is None else str(index + 1)
