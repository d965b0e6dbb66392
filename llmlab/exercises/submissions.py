"""The submissions `llmlab grade` reads, and the exercises it is told to grade.

Every *.ipynb in the submissions folder is read into memory before any code runs; a symbolic link,
a non-file or an oversized file gets a problem instead of data, and so does a file that is not a
valid notebook. The exercise ids come from the instructor, never from a submission.
"""
from __future__ import annotations

import os
import stat
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from llmlab.exercises.assign import declared_exercises, notebook_paths

MAX_NOTEBOOK_BYTES = 50 * 2**20


@dataclass
class Submission:
    """One handed-in notebook: its bytes, then the parsed notebook, or the problem that stops it."""
    student: str
    name: str
    data: bytes | None = None
    problem: str = ""          # why it cannot be run ("" when it can)
    notebook: object = None
    cell_errors: dict = field(default_factory=dict)


def collect(folder: Path) -> list[Submission]:
    """Every *.ipynb (any case) in `folder`, read into memory; symlinks and non-files get a problem."""
    subs = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.name.lower().endswith(".ipynb"):
            continue
        sub = Submission(entry.name[:-len(".ipynb")], entry.name)
        info = os.lstat(entry.path)
        if stat.S_ISLNK(info.st_mode):
            sub.problem = "refused: the submission is a symbolic link, not a notebook file (hand in the file itself)"
        elif not stat.S_ISREG(info.st_mode):
            sub.problem = "refused: the submission is not a regular file"
        elif info.st_size > MAX_NOTEBOOK_BYTES:
            sub.problem = f"refused: {info.st_size / 2**20:.0f} MiB is larger than any notebook should be"
        else:
            try:
                fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                with os.fdopen(fd, "rb") as f:
                    sub.data = f.read(MAX_NOTEBOOK_BYTES + 1)
            except OSError as e:
                sub.problem = f"could not be read ({e.strerror})"
        subs.append(sub)
    return subs


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


def cell_label(index) -> str:
    """A cell index as the instructor counts cells (from 1); "?" when unknown."""
    return "?" if index is None else str(index + 1)  # cells counted from 1, as an instructor reads them
