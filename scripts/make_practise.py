"""Write the practise copies of the chapters: practise/<chapter>.ipynb, solutions stubbed.

    .venv/bin/python scripts/make_practise.py           # write practise/
    .venv/bin/python scripts/make_practise.py --check   # exit 1 if a committed copy is out of date

Each chapter can be opened two ways: to read (chapters/, solutions shown) and to practise (practise/,
the student copy that `llmlab assign` makes, with a note on top). The copies are committed, so that
Colab can open them from the repository; tests/test_practise.py fails when one is out of date.

A chapter is two pages: the lesson (chapters/NN_name.ipynb), which holds the exercises, and its lab
(chapters/NN_name_lab.ipynb), which holds the evidence. A lab gets a practise copy only if it has
exercises of its own (a cell tagged "solution" or a `check("...")` call); the others have nothing to practise.

Each exercise gets the heading the book gives it, "**Exercise 5.1 (Scaled dot-product attention)**": a
notebook viewer shows the `{exercise}` block as plain code, without its title or number.
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
PRACTISE = ROOT / "practise"
NOTE = ("**Practise copy.** The solutions are removed: each exercise raises `NotImplementedError` until you "
        "write it, and its `check(...)` cell then grades your answer. The full chapter, solutions included, "
        "is `chapters/{name}` in the same repository.")


# the opening line of an exercise block: ```{exercise} Title (or ````, or :::), its options below it
EXERCISE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{exercise(?:-start)?\}[ \t]*(?P<title>.*)$", re.M)
CHAPTER_FILE = re.compile(r"^(\d+)([a-z]?)_")


def chapter_number(path: Path) -> str | None:
    """The chapter number the book gives a page, from its file name: "5", "10b", "0"; None for others.
    The book's own numbering (_ext/llmlab_numbers.py) reads it the same way."""
    match = CHAPTER_FILE.match(path.name)
    return None if match is None else str(int(match.group(1))) + match.group(2)


def _exercises(cell) -> list:
    """The numbered exercise blocks of a markdown cell the book shows (a hidden cell is not built)."""
    if cell.cell_type != "markdown" or "remove-cell" in cell.get("metadata", {}).get("tags", []):
        return []
    found = []
    for match in EXERCISE.finditer(cell.source):
        options = re.match(r"(?:\n:[\w-]+:.*)*", cell.source[match.end():]).group(0)
        if ":nonumber:" not in options:
            found.append(match)
    return found


def number_exercises(nb, chapter: Path) -> None:
    """Put the book's heading above every exercise of a practise copy: "**Exercise 5.1 (Title)**". A lab
    continues the count of its lesson (NN_name.ipynb), as the book does; a page without a chapter number
    counts from 1."""
    prefix = chapter_number(chapter)
    count = 0
    if is_lab(chapter):
        lesson = chapter.with_name(chapter.name.replace("_lab.ipynb", ".ipynb"))
        if lesson.exists():
            count = sum(len(_exercises(c)) for c in nbformat.read(lesson, as_version=4).cells)
    for cell in nb.cells:
        matches = _exercises(cell)
        for i, match in reversed(list(enumerate(matches, start=count + 1))):   # from the end: positions stay valid
            number = f"{prefix}.{i}" if prefix else str(i)
            title = match.group("title").strip()
            heading = f"**Exercise {number}" + (f" ({title})" if title else "") + "**\n\n"
            cell.source = cell.source[:match.start()] + heading + cell.source[match.start():]
        count += len(matches)


def is_lab(path: Path) -> bool:
    """A lab page: chapters/NN_name_lab.ipynb, the evidence that goes with the lesson NN_name.ipynb."""
    return path.stem.endswith("_lab")


def has_exercises(path: Path) -> bool:
    """Whether a notebook holds an exercise: a solution cell or a check("<id>", ...) call."""
    from llmlab.grading.assign import check_ids, is_solution
    nb = nbformat.read(path, as_version=4)
    return any(is_solution(cell) or (cell.cell_type == "code" and check_ids(cell.source)) for cell in nb.cells)


def chapters() -> list[Path]:
    """The notebooks that get a practise copy: every lesson and appendix, and the labs with exercises."""
    return sorted(p for p in CHAPTERS.glob("*.ipynb") if not is_lab(p) or has_exercises(p))


def practise_copy(chapter: Path) -> nbformat.NotebookNode:
    """The practise copy of one chapter, as a notebook (not written)."""
    from llmlab.grading.assign import assign
    with tempfile.TemporaryDirectory() as tmp:
        [(written, _)] = assign([chapter], tmp, verbose=False)
        nb = nbformat.read(written, as_version=4)
    note = nbformat.v4.new_markdown_cell(NOTE.format(name=chapter.name))
    note["id"] = "practise-note"
    # after the title cell, so the page still opens on the chapter's title
    nb.cells.insert(1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0, note)
    number_exercises(nb, chapter)
    for i, cell in enumerate(nb.cells):          # stable ids: a rebuilt copy is byte-identical
        cell["id"] = cell["id"] if cell["id"] == "practise-note" else f"cell-{i}"
    return nb


def comparable(nb) -> list[tuple]:
    return [(c.cell_type, c.source, tuple(c.get("metadata", {}).get("tags", []))) for c in nb.cells]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true", help="only check that the committed copies are current")
    args = parser.parse_args()
    stale = []
    PRACTISE.mkdir(exist_ok=True)
    expected_names = set()
    for chapter in chapters():
        target = PRACTISE / chapter.name
        expected_names.add(target.name)
        nb = practise_copy(chapter)
        if args.check:
            if not target.exists() or comparable(nbformat.read(target, as_version=4)) != comparable(nb):
                stale.append(target.name)
        else:
            nbformat.write(nb, target)
    extra = sorted(p.name for p in PRACTISE.glob("*.ipynb") if p.name not in expected_names)
    if args.check:
        if stale or extra:
            print("out of date:", ", ".join(stale + [f"{e} (no such chapter)" for e in extra]))
            print("run: .venv/bin/python scripts/make_practise.py")
            return 1
        print(f"{len(expected_names)} practise copies are current")
        return 0
    for name in extra:
        (PRACTISE / name).unlink()
    print(f"wrote {len(expected_names)} practise copies into {PRACTISE.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
