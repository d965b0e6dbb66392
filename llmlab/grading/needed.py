"""Which cells of a submission `llmlab grade` runs.

A whole chapter spends most of its time on the figures and measurements of the book (a real model
over dozens of prompts); its exercises need a few imports and the functions the student wrote.
So grade runs a cell of a submission unless all of these hold:

1. its source is exactly that of a cell of the assigned notebook (the student neither wrote nor
   changed it), and the instructor did not tag that cell `grade-run`;
2. it has no check("<id>", ...) call;
3. no cell that runs reads a name it sets: assigns, imports, defines, deletes, or changes in place
   (`x[0] = ...`, `x.a = ...`, `x += ...`, or a method called as a statement, `x.append(...)`; a
   method of an imported module called as a statement, `torch.manual_seed(0)`, does not count).
   A name read at the top of a cell needs the cells before it that set it; a name read inside a
   function needs every cell that sets it, since the grader calls the function after the last cell.

Everything else runs, in the notebook's order. So a skipped cell only takes state away: a student's
function is never graded with anything the student's own notebook would not have made. The
instructor tags a cell `grade-skip` in the source notebook to skip it even when rule 3 keeps it
(a cell whose state no exercise needs in a way the rules cannot see), or `grade-run` to always run
it; `--run-every-cell` runs them all. Where a reading of the code cannot tell what a cell reads
(`globals()`, `eval`, `exec`, `vars()`, `from x import *`, or code that does not parse), the cell runs
and so does every cell before it; inside a function, every cell runs. A cell with IPython magics
(%pip, !ls) runs. Without --assignment every cell runs, since no cell is the instructor's.

>>> cells = ["import math", "slow = 1", "def area(r):\\n    return math.pi * r * r", "check('area', area)"]
>>> sorted(cells_to_skip(cells, set(cells[:3])))
[1]
"""
from __future__ import annotations

import ast
import functools
import symtable

from llmlab.grading.assign import check_ids

RUN_TAG = "grade-run"
SKIP_TAG = "grade-skip"
DYNAMIC = {"globals", "eval", "exec", "vars", "locals", "__builtins__"}   # read names given as strings


def _tags(cell) -> set[str]:
    return {str(t).strip().lower() for t in cell.get("metadata", {}).get("tags", [])}


def key(source: str) -> str:
    """A cell's source as compared with the assignment's (trailing spaces and blank lines aside)."""
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def instructor_cells(notebooks) -> tuple[set[str], set[str], set[str]]:
    """The code cells of the assigned notebooks: (every source, sources tagged grade-run, grade-skip)."""
    every, run, skip = set(), set(), set()
    for nb in notebooks:
        for cell in nb.cells:
            if cell.cell_type == "code":
                every.add(key(cell.source))
                tags = _tags(cell)
                if RUN_TAG in tags:
                    run.add(key(cell.source))
                if SKIP_TAG in tags:
                    skip.add(key(cell.source))
    return every, run, skip


class _Cell:
    """What one cell sets and reads; `followed` is False where its code cannot be read."""

    def __init__(self, source: str, modules: set[str]):
        self.modules = modules   # names the notebook binds only by import
        self.sets: set[str] = set()
        self.reads_now: set[str] = set()     # read when the cell runs
        self.reads_later: set[str] = set()   # read inside functions, when they are called
        self.magic = self.dynamic_now = self.dynamic_later = False
        try:
            self.followed = self._read(source)
        except (RecursionError, MemoryError, ValueError, TypeError):   # nested too deep for the parser...
            self.sets.clear()
            self.followed = False
        if not self.followed:    # code that cannot be parsed: it runs and may read anything
            self.dynamic_now = self.dynamic_later = True

    def _read(self, source: str) -> bool:
        source = _python(source)
        try:
            tree = ast.parse(source)
            table = symtable.symtable(source, "<cell>", "exec")
        except (SyntaxError, ValueError):
            return False
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                return False
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules |= {(a.asname or a.name).split(".")[0] for a in node.names}
        for sym in table.get_symbols():
            if sym.is_referenced():
                self.reads_now.add(sym.get_name())
            if sym.is_assigned() or sym.is_imported():
                self.sets.add(sym.get_name())
        todo = list(table.get_children())
        while todo:
            child = todo.pop()
            todo += child.get_children()
            for sym in child.get_symbols():
                if sym.is_global() and sym.is_referenced():
                    self.reads_later.add(sym.get_name())
                if sym.is_declared_global() and sym.is_assigned():
                    self.sets.add(sym.get_name())
        self.reads_now -= _bound_first(tree, self.reads_now)
        for node in _top_level(tree):
            targets = []
            if isinstance(node, (ast.Assign, ast.Delete)):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
                targets = [node.target]
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, (ast.Attribute, ast.Subscript)) and _root(sub) is not None:
                        self.sets.add(_root(sub))    # x[0] = ..., x.a = ...: x changes
                        self.reads_now.add(_root(sub))
                if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                    self.reads_now.add(node.target.id)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                    and isinstance(node.value.func, ast.Attribute):
                name = _root(node.value.func)
                if name is not None and name not in modules and name not in self.modules:
                    self.sets.add(name)              # x.append(...) as a statement: x may change
        if all(isinstance(c, ast.Call) and c.func is n and (c.args or c.keywords)
               for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "vars"
               for c in [_parents(tree).get(n)]):
            self.reads_now.discard("vars")       # vars(module) reads that module, not the notebook's names
            self.reads_later.discard("vars")
        self.magic = "get_ipython" in self.reads_now | self.reads_later
        self.dynamic_now = bool(self.reads_now & DYNAMIC)
        self.dynamic_later = bool(self.reads_later & DYNAMIC)
        return True


def _bound_first(tree, names: set[str]) -> set[str]:
    """The `names` the cell binds before it reads them, statement by statement (x = 1; print(x)):
    those reads do not need an earlier cell. A statement that reads and binds a name (x += 1,
    for x in x) reads it first."""
    first = set()
    decided = set()
    for stmt in tree.body:
        loads, stores = set(), set()
        todo = [stmt]
        while todo:
            node = todo.pop()
            if isinstance(node, ast.Name):
                (stores if isinstance(node.ctx, ast.Store) else loads).add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stores.add(node.name)
                todo += node.decorator_list + (node.bases + [k.value for k in node.keywords]
                                               if isinstance(node, ast.ClassDef) else
                                               node.args.defaults + [d for d in node.args.kw_defaults if d])
                continue
            elif isinstance(node, ast.Lambda):
                todo += node.args.defaults + [d for d in node.args.kw_defaults if d]
                continue
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                stores |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                loads.add(node.target.id)
            todo += list(ast.iter_child_nodes(node))
        for name in (names - decided) & (loads | stores):
            decided.add(name)
            if name not in loads:
                first.add(name)
    return first


def _top_level(tree):
    """Every statement that runs when the cell runs (not the bodies of functions and classes)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo += [n for n in getattr(node, field, []) if isinstance(n, (ast.stmt, ast.ExceptHandler))]


def _tree(source: str):
    """The cell's syntax tree, or None where it cannot be parsed (a syntax error, nesting too deep)."""
    try:
        return ast.parse(_python(source))
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return None


def _parents(tree) -> dict:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


@functools.lru_cache(maxsize=1024)
def _python(source: str) -> str:
    """A cell's source as Python (IPython's %magics and !commands become calls of get_ipython())."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        return TransformerManager().transform_cell(source)
    except Exception:
        return source


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def cells_to_skip(sources: list[str], instructor: set[str], run_tagged: set[str] = frozenset(),
                  skip_tagged: set[str] = frozenset(), why: dict | None = None) -> set[int]:
    """Indices (into `sources`, a submission's code cells in order) of the cells grade need not run.
    `instructor` holds the assigned notebook's cell sources (see key()); see the module docstring.
    `why`, a dict, receives for each cell kept by another the reason: {kept: (by, names)}."""
    keys = [key(s) for s in sources]
    imported = set()
    for s in sources:
        for node in ast.walk(_tree(s) or ast.Module(body=[], type_ignores=[])):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
    rebound = set().union(*(_bound_names(s) for s in sources))
    modules = set() if "*" in rebound else imported - rebound
    cells = [_Cell(s, modules) for s in sources]
    if any(c.dynamic_later for c in cells):
        return set()        # a function that reads names by string may read any of them
    needed = {i for i, k in enumerate(keys) if k not in instructor or k in run_tagged or check_ids(sources[i])
              or cells[i].magic or cells[i].dynamic_now or not cells[i].followed}
    todo = sorted(needed)
    while todo:
        i = todo.pop()
        for j, other in enumerate(cells):
            if j in needed or j == i:
                continue
            if (j < i and (cells[i].dynamic_now or other.sets & cells[i].reads_now)) \
                    or other.sets & cells[i].reads_later:
                if why is not None:
                    why[j] = (i, sorted(other.sets & ((cells[i].reads_now if j < i else set()) | cells[i].reads_later)))
                needed.add(j)
                todo.append(j)
    skip = {i for i in range(len(sources)) if i not in needed}
    skip |= {i for i, k in enumerate(keys) if k in instructor and k in skip_tagged and not check_ids(sources[i])}
    return skip


def _bound_names(source: str) -> set[str]:
    """The names `source` binds other than by an import (every name, "*", where it cannot be parsed)."""
    tree = _tree(source)
    if tree is None:
        return {"*"}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))} \
        | {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


NOT_RUN = "(not run when graded: no exercise needs what this cell makes)\n"


def assigned_cells(assignment):
    """instructor_cells of the assigned notebook (or folder of notebooks); None without an assignment."""
    import nbformat

    from llmlab.grading.assign import notebook_paths

    paths = notebook_paths([assignment]) if assignment else []
    return instructor_cells([nbformat.read(p, as_version=4) for p in paths]) if paths else None


def plan(nb, instructor: tuple[set[str], set[str], set[str]] | None) -> set[int]:
    """Indices into nb.cells of the code cells grade skips in submission `nb` (none without an assignment)."""
    if not instructor or not instructor[0]:
        return set()
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    skip = cells_to_skip([nb.cells[i].source for i in code], *instructor)
    return {code[k] for k in skip}

