"""Load a Python file that is not in a package (scripts/, figures/, tests/data/) as a module."""
from __future__ import annotations

import importlib.util
from pathlib import Path


def load_file(path: str | Path, name: str | None = None):
    """The module that runs the file at `path` (named `name`, or the file's stem)."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file that can be loaded as a module.")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
