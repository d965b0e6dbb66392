"""Write the practise copies of the chapters: practise/<chapter>.ipynb, solutions stubbed.

    .venv/bin/python scripts/make_practise.py           # write practise/
    .venv/bin/python scripts/make_practise.py --check   # exit 1 if a committed copy is out of date

Each chapter can be opened two ways: to read (chapters/, solutions shown) and to practise (practise/,
the student copy that `llmlab assign` makes, with a note on top). The copies are committed, so that
Colab can open them from the repository; tests/test_practise.py fails when one is out of date.

A chapter is two pages: the lesson (chapters/NN_name.ipynb), which holds the exercises, and its lab
(chapters/NN_name_lab.ipynb), which holds the evidence. A lab gets a practise copy only if it has
exercises of its own (a cell tagged "solution" or a `check("...")` call); the others have nothing to practise.
"""
from __future__ import annotations

import argparse
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
