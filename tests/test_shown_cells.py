"""Shown code runs on its own: a reader who copies the visible cells of a page gets no NameError.

Every name a shown code cell reads must be defined by a shown cell above it in the same page (or in
the cell itself), imported there, or be a builtin. Hidden cells (tagged remove-cell, hide-cell,
hide-input, remove-input, or the Colab setup cell) hold only what a reader never calls: glue,
pinning asserts, plotting boilerplate. An exercise's solution cell (tagged solution, folded) counts as
shown: it is the code the reader writes, and the practise copy asks for exactly that.

1. A static check of every page in chapters/ (lessons, labs, the notation appendix): it reads each
   shown cell's Python with the standard library's `symtable`, which knows Python's scopes
   (assignments of every kind, def/class, imports, loop/with/except targets, comprehension
   variables, walrus, parameters, `global`). A name read inside a function body may come from any
   shown cell of the page (the function runs when it is called); a name read at the top level or in
   a comprehension must be defined above. IPython lines (`%magic`, `!shell`) are left out.
2. An execution check: the shown cells of a page alone, in order, in a fresh kernel (nbclient),
   failing on any error. Run for chapter 1's lesson and lab here, and for every page with
   LLMLAB_SHOWN_ALL=1 (slow: each page loads its models).

KNOWN_DEBT lists a page whose shown cells still read names they do not define, with those names, as a
strict expected failure: fixing it turns its xfail into a failure that asks for its entry to go, and a
page whose debt grows fails outright. It is empty: every page passes.
"""
from __future__ import annotations

import builtins
import json
import os
import re
import symtable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "chapters").glob("*.ipynb"))
HIDDEN = {"remove-cell", "hide-cell", "hide-input", "remove-input", "colab-setup"}
# names IPython puts in every notebook's namespace
IPYTHON_NAMES = {"display", "get_ipython", "In", "Out", "exit", "quit", "_", "__", "___"}
KNOWN_NAMES = set(dir(builtins)) | IPYTHON_NAMES

# Pages written before the rule, with the names their shown cells read from hidden cells (see the docstring).
KNOWN_DEBT = {
}


def is_hidden(cell) -> bool:
    """Folded or removed, and not an exercise's solution: a solution (tagged solution and hide-input)
    is the code the reader writes in the exercise, so what it defines counts as shown."""
    tags = {t.lower() for t in cell.get("metadata", {}).get("tags", [])}
    return bool(HIDDEN & tags) and "solution" not in tags


def python_of(source: str) -> str | None:
    """The cell's Python without IPython's lines; None for a cell in another language (%%bash, %%html)."""
    lines = source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].split()[0][2:]
        if magic not in ("time", "timeit", "capture", "prun"):
            return None
        lines = lines[1:]
    kept = []
    for line in lines:
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if stripped.startswith(("%time ", "%timeit ")):          # `%time stmt` runs stmt
            kept.append(indent + stripped.split(None, 1)[1])
        elif stripped.startswith(("%", "!")) or re.match(r"[\w\s,]+=\s*[!%]", stripped):
            kept.append(indent + "pass")                            # keep the block's shape
        else:
            kept.append(line)
    return "\n".join(kept)


COMPREHENSIONS = {"listcomp", "setcomp", "dictcomp", "genexpr"}   # symtable calls their scopes functions


def _walk(table, deferred: bool):
    yield table, deferred
    for child in table.get_children():
        # a function's body runs when it is called; a comprehension or a class body runs at once
        runs_later = child.get_type() == "function" and child.get_name() not in COMPREHENSIONS
        yield from _walk(child, deferred or runs_later)


def names_of(source: str) -> tuple[set, set, set]:
    """(bound, read now, read later) at the top level of one cell's Python.

    bound: names the cell defines for the cells after it; read now: top-level names the cell reads
    while it runs (top level, comprehensions, class bodies, default values); read later: top-level
    names read inside a function or lambda body."""
    top = symtable.symtable(source, "<cell>", "exec")
    bound, now, later = set(), set(), set()
    for sym in top.get_symbols():
        if sym.is_assigned() or sym.is_imported() or sym.is_namespace():
            bound.add(sym.get_name())
    for table, deferred in _walk(top, False):
        for sym in table.get_symbols():
            name = sym.get_name()
            if table is top:
                if sym.is_referenced():
                    now.add(name)
                continue
            if sym.is_declared_global() and sym.is_assigned():
                bound.add(name)                                     # `global x; x = ...` in a function
            elif sym.is_global() and sym.is_referenced():
                (later if deferred else now).add(name)
    return bound, now, later


def shown_cells(path: Path) -> list[tuple[int, str]]:
    """(cell number, source) of the shown code cells of a page, in order."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(number, "".join(cell["source"])) for number, cell in enumerate(cells)
            if cell["cell_type"] == "code" and not is_hidden(cell)]


def undefined_names(path: Path) -> dict[int, set]:
    """cell number -> the names that shown cell reads and no shown cell above it (or itself) defines."""
    parsed = []
    for number, source in shown_cells(path):
        python = python_of(source)
        if python is None:
            continue
        try:
            parsed.append((number, *names_of(python)))
        except SyntaxError as error:
            raise AssertionError(f"{path.name} cell {number}: not Python ({error})") from None
    everywhere = set().union(*(bound for _, bound, _, _ in parsed)) if parsed else set()
    defined, missing = set(KNOWN_NAMES), {}
    for number, bound, now, later in parsed:
        gaps = (now - defined - bound) | (later - defined - bound - everywhere)
        if gaps:
            missing[number] = gaps
        defined |= bound
    return missing


def report(path: Path, missing: dict) -> str:
    return f"{path.name}: shown cells read names that only hidden cells (or none) define:\n" + "\n".join(
        f"  cell {number}: {', '.join(sorted(names))}" for number, names in sorted(missing.items()))


def page_params():
    for path in PAGES:
        marks = []
        if path.name in KNOWN_DEBT:
            marks = [pytest.mark.xfail(strict=True, reason=f"known: shown cells read {sorted(KNOWN_DEBT[path.name])}")]
        yield pytest.param(path, id=path.name, marks=marks)


@pytest.mark.parametrize("path", list(page_params()))
def test_shown_cells_read_only_what_shown_cells_define(path):
    missing = undefined_names(path)
    assert not missing, report(path, missing)


@pytest.mark.parametrize("name", sorted(KNOWN_DEBT))
def test_known_debt_does_not_grow(name):
    path = ROOT / "chapters" / name
    assert path.exists(), f"KNOWN_DEBT lists {name}, which is not in chapters/: remove its entry"
    found = set().union(*undefined_names(path).values()) if undefined_names(path) else set()
    new = found - KNOWN_DEBT[name]
    assert not new, report(path, {n: s & new for n, s in undefined_names(path).items() if s & new})


# --- the checker itself, on small pages ---

def write_page(tmp_path, *cells) -> Path:
    notebook = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    for source, tags in cells:
        notebook["cells"].append({"cell_type": "code", "source": source, "metadata": {"tags": tags},
                                  "outputs": [], "execution_count": None})
    path = tmp_path / "99_page.ipynb"
    path.write_text(json.dumps(notebook))
    return path


def test_a_name_from_a_hidden_cell_is_reported(tmp_path):
    page = write_page(tmp_path, ("def mean_ci(v):\n    return v", ["hide-input"]),
                      ("results = [1, 2]", ["remove-cell"]),
                      ("import torch\nprint(mean_ci(results), torch.pi)", []))
    assert undefined_names(page) == {2: {"mean_ci", "results"}}


def test_every_way_of_binding_a_name_counts(tmp_path):
    page = write_page(tmp_path, (
        "import numpy as np\nfrom math import pi\na, (b, c) = 1, (2, 3)\nfor d in range(2): pass\n"
        "with open(str(pi)) as e: pass\ntry:\n    pass\nexcept ValueError as f:\n    pass\n"
        "def g(x, *args, k=pi, **kw):\n    return x + a + later_name\nclass H: pass\n"
        "squares = [i * i for i in range(3)]\nif (w := 5): pass\n%matplotlib inline\n!ls\n", []),
        ("%time total = a + b + c + d + g(1) + w + np.pi\nH(), e, f, squares, total\n"
         "lambda q: q + later_name", []),
        ("later_name = 1", []))
    assert undefined_names(page) == {}


def test_order_matters_at_the_top_level_but_not_inside_a_function(tmp_path):
    page = write_page(tmp_path, ("print(x)\ndef f():\n    return y", []), ("x = y = 1", []))
    assert undefined_names(page) == {0: {"x"}}


def test_a_comprehension_runs_at_once(tmp_path):
    page = write_page(tmp_path, ("[v + offset for v in range(3)]", []), ("offset = 1", []))
    assert undefined_names(page) == {0: {"offset"}}


# --- the shown cells executed alone ---

EXECUTED = ["01_a_model_is_a_function.ipynb", "01_a_model_is_a_function_lab.ipynb"]


def executed_pages():
    if os.environ.get("LLMLAB_SHOWN_ALL") == "1":
        return [p.name for p in PAGES]
    return [name for name in EXECUTED if (ROOT / "chapters" / name).exists()]


@pytest.mark.parametrize("name", executed_pages())
def test_shown_cells_run_alone_in_a_fresh_kernel(name, tmp_path):
    """Only the shown code cells of the page, in order, in a new kernel: no error in any."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path = ROOT / "chapters" / name
    cells = [nbformat.v4.new_code_cell(source) for _, source in shown_cells(path)]
    notebook = nbformat.v4.new_notebook(cells=cells)
    client = NotebookClient(notebook, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "chapters")}})
    try:
        client.execute()
    except CellExecutionError as error:
        pytest.fail(f"{name}: a shown cell fails when the shown cells run alone:\n{str(error)[-3000:]}")
