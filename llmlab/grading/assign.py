"""`llmlab assign`: turn notebooks with solutions into student copies.

A code cell tagged "solution" holds the instructor's solution. In the student copy:
- every top-level function (and every method of a top-level class) keeps its decorators, signature
  and docstring, and its body becomes `raise NotImplementedError("Exercise <id>: write your solution here")`;
- top-level imports stay (the signatures may need them); any other solution code is replaced by a
  comment line;
- check cells (`check("<id>", fn)`) stay as they are;
- markdown cells tagged "solution" and sphinx-exercise `{solution}` blocks are removed, also when
  indented or `>`-quoted; a gated solution (`{solution-start}` ... `{solution-end}`) is cut out at
  its markers, across cells: text before and after it in the same cell stays, code cells inside it
  are stubbed like solution cells. Tags and directive names match in any case ("Solution");
  a block that is never closed is an error;
- all outputs and execution counts are cleared; the exercise ids go into the notebook metadata
  (metadata.llmlab.exercises), where `llmlab grade` finds them, and so do the points the instructor
  set (metadata.llmlab.points, or a cell's {"llmlab": {"exercise": "<id>", "points": 2}}).

The id in the stub comes from cell metadata `{"llmlab": {"exercise": "<id>"}}`, else from the first
check("<id>", ...) call after the solution cell, else from the function name.

Executed top to bottom, a student copy runs to the end: each stub raises NotImplementedError, and
check() reports that as "not attempted" instead of stopping the notebook.

>>> print(stub_source('def double(x):\\n    "Twice x."\\n    return 2 * x\\n', "double"), end="")
def double(x):
    "Twice x."
    raise NotImplementedError("Exercise double: write your solution here")
"""
from __future__ import annotations

import ast
import copy
import re
from pathlib import Path

import nbformat

SOLUTION_TAG = "solution"
CHECK_CALL = re.compile(r"""\bcheck\(\s*(['"])([A-Za-z0-9_\-]+)\1""")
STUB = 'raise NotImplementedError("Exercise {id}: write your solution here")'
# The opening line of a sphinx-exercise directive in markdown: ```{solution} label, :::{solution-start},
# after any indentation or `>` quote marks (group 1), in any case.
DIRECTIVE = re.compile(r"^([ \t>]*)(`{3,}|:{3,})[ \t]*\{(solution|solution-start|solution-end)\}", re.I)
REMOVED_NOTE = "*(The solution is not part of this copy.)*"


def check_ids(source: str) -> list[str]:
    """Exercise ids of the check("<id>", ...) calls in a code cell's source, in order."""
    return [m.group(2) for m in CHECK_CALL.finditer(source)]


def declared_exercises(nb) -> list[str]:
    """The exercises a notebook checks: every check("<id>", ...) in its code cells, first occurrence order."""
    ids: list[str] = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            ids += [i for i in check_ids(cell.source) if i not in ids]
    return ids


def is_solution(cell) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return any(isinstance(t, str) and t.strip().lower() == SOLUTION_TAG for t in tags)


class UnclosedSolution(ValueError):
    """A {solution} or {solution-start} block without its end."""


# ---------------------------------------------------------------------------------------------- code

def stub_source(source: str, exercise: str) -> str:
    """The student version of a solution cell's source (see the module docstring)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        try:  # IPython syntax (%magics, !shell): translate to Python first
            from IPython.core.inputtransformer2 import TransformerManager
            source = TransformerManager().transform_cell(source)
            tree = ast.parse(source)
        except Exception:
            return f"# Exercise {exercise}: write your solution here\n"
    lines = source.splitlines()
    needed = _names_in_signatures(tree)
    parts: list[str] = []
    other_code = False
    previous_import = False
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and _assigned_names(node) & needed:
            # a constant that a kept signature uses as a default (def f(x, eps=EPS)) must stay
            parts.append("\n".join(lines[node.lineno - 1:node.end_lineno]))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            text = "\n".join(lines[node.lineno - 1:node.end_lineno])
            if previous_import:
                parts[-1] += "\n" + text  # consecutive imports stay one block
            else:
                parts.append(text)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parts.append(_stub_function(lines, node, exercise))
        elif isinstance(node, ast.ClassDef):
            parts.append(_stub_class(lines, node, exercise))
        elif not other_code:
            other_code = True
            parts.append(f"# Exercise {exercise}: write your solution here")
        previous_import = isinstance(node, (ast.Import, ast.ImportFrom))
    if not parts:
        parts.append(f"# Exercise {exercise}: write your solution here")
    return "\n\n".join(parts)


def _names_in_signatures(tree: ast.Module) -> set[str]:
    """Names read by the decorators, defaults and annotations of top-level defs and their methods."""
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    defs += [m for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body
             if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    parts = []
    for d in defs:
        parts += d.decorator_list
        if isinstance(d, ast.ClassDef):
            parts += d.bases + [k.value for k in d.keywords]
            continue
        a = d.args
        parts += a.defaults + [x for x in a.kw_defaults if x is not None] + ([d.returns] if d.returns else [])
        parts += [arg.annotation for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
                  if arg is not None and arg.annotation is not None]
    return {n.id for p in parts for n in ast.walk(p) if isinstance(n, ast.Name)}


def _assigned_names(node) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _header(lines: list[str], node) -> list[str]:
    """Decorators, signature and docstring of a def/class, as written in the source."""
    start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
    first = node.body[0]
    head = lines[start:first.lineno - 1]
    while head and (not head[-1].strip() or head[-1].strip().startswith("#")):
        head.pop()  # comments between the signature and the first statement may explain the solution
    if _has_docstring(node):
        head += lines[first.lineno - 1:first.end_lineno]
    return head


def _has_docstring(node) -> bool:
    first = node.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


def _stub_function(lines: list[str], node, exercise: str) -> str:
    first = node.body[0]
    if first.lineno == node.lineno:  # `def f(x): return x` on one line: rebuild it
        new = copy.deepcopy(node)
        new.body = ([first] if _has_docstring(node) else []) + ast.parse(STUB.format(id=exercise)).body
        return ast.unparse(new)
    indent = " " * first.col_offset
    return "\n".join(_header(lines, node) + [indent + STUB.format(id=exercise)])


def _stub_class(lines: list[str], node: ast.ClassDef, exercise: str) -> str:
    first = node.body[0]
    if first.lineno == node.lineno:
        return f"# Exercise {exercise}: write the class {node.name} here"
    indent = " " * first.col_offset
    out = _header(lines, node)
    methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    dropped = any(not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in node.body[1 if _has_docstring(node) else 0:])
    if dropped:
        out.append(f"{indent}# Exercise {exercise}: class attributes of your solution go here")
    for m in methods:
        out += [""] + _stub_function(lines, m, exercise).splitlines()
    if not methods and not _has_docstring(node):
        out.append(indent + "pass")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- notebooks

def student_copy(nb) -> tuple[nbformat.NotebookNode, list[str]]:
    """A student version of notebook `nb` (not modified) and the exercise ids it declares."""
    nb = copy.deepcopy(nb)
    exercises = declared_exercises(nb)
    cells = []
    gated = None  # (cell number, line) where an open {solution-start} began
    for index, cell in enumerate(nb.cells):
        tags = list(cell.get("metadata", {}).get("tags", []))
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            if is_solution(cell) or gated:
                cell.source = stub_source(cell.source, _exercise_for(nb.cells, index))
                cell.metadata["tags"] = [t for t in tags if str(t).strip().lower() != SOLUTION_TAG] + ["exercise"]
        elif cell.cell_type == "markdown":
            if is_solution(cell) and not gated:
                cell.source = REMOVED_NOTE
                cell.metadata["tags"] = [t for t in tags if str(t).strip().lower() != SOLUTION_TAG]
            else:
                cell.source, gated = strip_solutions(cell.source, gated, index)
                if not cell.source.strip():
                    continue  # the whole cell was part of a gated solution
                cell.metadata["tags"] = [t for t in tags if str(t).strip().lower() != SOLUTION_TAG]
        elif gated:  # raw cells inside a gated solution
            continue
        cells.append(cell)
    if gated:
        raise UnclosedSolution(f"cell {gated[0] + 1}, line {gated[1]}: a {{solution-start}} block has no "
                               "{solution-end} after it. Close it with ```{solution-end}``` (a fence line of its own).")
    points = _points(nb)
    nb.cells = cells
    nb.metadata["llmlab"] = {"exercises": exercises}
    if points:
        nb.metadata["llmlab"]["points"] = points
    return nb, exercises


def _points(nb) -> dict:
    """Points the instructor set: notebook metadata {"llmlab": {"points": {"<id>": 2}}}, or a cell's
    {"llmlab": {"exercise": "<id>", "points": 2}}; `llmlab grade` reads them from the student copy."""
    meta = nb.metadata.get("llmlab", {})
    points = dict(meta.get("points") or {}) if isinstance(meta, dict) else {}
    for cell in nb.cells:
        cell_meta = cell.get("metadata", {}).get("llmlab", {})
        if isinstance(cell_meta, dict) and cell_meta.get("exercise") and "points" in cell_meta:
            points[str(cell_meta["exercise"])] = cell_meta["points"]
    return points


def strip_solutions(source: str, gated=None, index: int = 0) -> tuple[str, tuple | None]:
    """Cut {solution} blocks and gated solutions out of one markdown cell's text.

    `gated` is None, or where a {solution-start} still open from an earlier cell began; returns the
    text left and the same for the next cell. The removed part becomes REMOVED_NOTE.

    >>> strip_solutions("Q?\\n```{solution} a\\nsecret\\n```\\nafter")[0]
    'Q?\\n*(The solution is not part of this copy.)*\\nafter'
    """
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    noted = False

    def note():
        nonlocal noted
        if not noted:
            out.append(REMOVED_NOTE + "\n")
            noted = True

    while i < len(lines):
        m = DIRECTIVE.match(lines[i])
        if gated:
            if m and m.group(3).lower() == "solution-end":
                i = _block_end(lines, i, m, index) + 1
                gated = None
                noted = False
            else:
                i += 1
            continue
        if not m:
            out.append(lines[i])
            i += 1
            continue
        kind = m.group(3).lower()
        if kind == "solution":
            i = _block_end(lines, i, m, index) + 1
            note()
            noted = False
        elif kind == "solution-start":
            gated = (index, i + 1)
            i = _block_end(lines, i, m, index) + 1
            note()
        else:  # a {solution-end} with no start: drop the marker itself
            i = _block_end(lines, i, m, index) + 1
    text = "".join(out)
    return (text.rstrip("\n") if not source.endswith("\n") else text), gated


def _block_end(lines: list[str], start: int, m, index: int) -> int:
    """The line index of the fence that closes the directive opened at lines[start]."""
    fence = m.group(2)
    closing = re.compile(r"^[ \t>]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
    for j in range(start + 1, len(lines)):
        if closing.match(lines[j].rstrip("\r\n")):
            return j
    raise UnclosedSolution(f"cell {index + 1}, line {start + 1}: the {{{m.group(3)}}} block opened with "
                           f"{fence!r} is never closed. End it with a line {fence!r}.")


def _exercise_for(cells, index: int) -> str:
    """The id for the solution cell at `index`: metadata, else the next check call, else the function name."""
    meta = cells[index].get("metadata", {}).get("llmlab", {})
    if isinstance(meta, dict) and meta.get("exercise"):
        return str(meta["exercise"])
    for cell in cells[index + 1:]:
        if cell.cell_type == "code" and is_solution(cell):
            break
        if cell.cell_type == "code" and check_ids(cell.source):
            return check_ids(cell.source)[0]
    names = re.findall(r"^def (\w+)", cells[index].source, re.M)
    return names[0] if names else "exercise"


def notebook_paths(sources) -> list[Path]:
    """Expand files and folders (every *.ipynb inside, sorted) into notebook paths."""
    paths: list[Path] = []
    for src in sources:
        src = Path(src)
        if src.is_dir():
            paths += sorted(p for p in src.glob("*.ipynb") if not p.name.startswith("."))
        elif src.exists():
            paths.append(src)
        else:
            raise FileNotFoundError(f"{src} does not exist. Pass notebook files or folders that contain .ipynb files.")
    return paths


def assign(sources, out_dir, verbose: bool = True) -> list[tuple[Path, list[str]]]:
    """Write a student copy of every source notebook into out_dir; the sources are not touched.

    Returns [(written path, exercise ids), ...].
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for src in notebook_paths(sources):
        target = out_dir / src.name
        if target.resolve() == src.resolve():
            raise ValueError(f"--out would overwrite the source {src}; choose another folder for the student copies.")
        nb = nbformat.read(src, as_version=4)
        try:
            student, exercises = student_copy(nb)
        except UnclosedSolution as e:
            raise UnclosedSolution(f"{src}: {e}") from None
        nbformat.validate(student)
        nbformat.write(student, target)
        written.append((target, exercises))
        if verbose:
            n = sum(1 for c in nb.cells if c.cell_type == "code" and is_solution(c))
            note = f"{n} solution cell{'s' if n != 1 else ''} stubbed; exercises: {', '.join(exercises) or 'none'}"
            print(f"{src} -> {target}  ({note})")
            if n and not exercises:
                print("  warning: solution cells but no check(\"<id>\", ...) call; grade will find no exercises here.")
    return written
