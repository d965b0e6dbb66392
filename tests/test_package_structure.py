"""The package stays small and its imports run one way.

- no module of llmlab is longer than MAX_LINES: a chapter shows a learner whole files;
- the graph "module A imports module B" has no cycle. Imports inside functions count too: a
  cycle hidden in a function body still means two modules that cannot be read one after the other.

The graph is read from the source with `ast`; nothing is imported or run.
"""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "llmlab"
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """Every import statement, at any depth (functions, methods, try blocks), except `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_of(name: str) -> set:
    """The llmlab modules that module `name` imports.

    ``from P import x`` is an edge to the module P.x when that is a module, else to P itself
    (P's ``__init__`` when P is a package). A package's parents, which Python runs first, are
    not edges: every submodule would otherwise "import" its package.
    """
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:  # relative: from . import x, from ..y import z
            anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
            base = ".".join(anchor + ([base] if base else []))
        for alias in node.names:
            targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {t for t in targets if t in MODULES and t != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def find_cycle(graph: dict) -> list | None:
    """One cycle as [a, b, ..., a], or None (depth-first search; the stack is the current path)."""
    done = set()
    for start in sorted(graph):
        if start in done:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            path = [n for n, _ in stack]
            if child is None:
                done.add(node)
                stack.pop()
            elif child in path:
                return path[path.index(child):] + [child]
            elif child not in done:
                stack.append((child, iter(sorted(graph[child]))))
    return None


def test_the_graph_reader_sees_what_it_should():
    """The reader itself: known edges of today's package, including one made inside a function."""
    assert "llmlab.config" in GRAPH["llmlab.convert"]                 # module level
    assert "llmlab.gguf" in GRAPH["llmlab.loading"]                   # inside convert_gguf()
    assert "llmlab.tokenization.chat" in GRAPH["llmlab.tokenization.loading"]   # from P import submodule
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_import_graph_has_no_cycle():
    cycle = find_cycle(GRAPH)
    if cycle:
        print("import cycle:", " -> ".join(cycle))
    assert cycle is None, "llmlab's modules import each other in a circle: " + " -> ".join(cycle)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_short_enough_to_read(name):
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, (f"{MODULES[name].relative_to(PACKAGE.parent)} has {lines} lines; split it so that "
                                f"no module of llmlab is over {MAX_LINES}.")


PUBLIC_PACKAGES = ["llmlab", "llmlab.inspection", "llmlab.tokenization", "llmlab.stats", "llmlab.kvcache"]


def test_each_public_name_has_one_import_path():
    """A name is public in exactly one of the packages readers import from, and no module keeps an
    old path alive with an unused import (`# noqa: F401` re-exports)."""
    import importlib

    owner = {}
    for package in PUBLIC_PACKAGES:
        for name in importlib.import_module(package).__all__:
            assert name not in owner, f"{name} is public in both {owner[name]} and {package}"
            owner[name] = package
    for name, path in MODULES.items():
        for line in path.read_text(encoding="utf-8").splitlines():
            assert not (line.lstrip().startswith("from llmlab") and "noqa: F401" in line), \
                f"{name} re-exports names: {line.strip()}"
