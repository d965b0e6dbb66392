"""scripts/execute_book.py: the book's notebooks executed several at a time into the build's cache."""
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from script_loader import load_file

ROOT = Path(__file__).resolve().parent.parent
execute_book = load_file(ROOT / "scripts" / "execute_book.py")

TIMERS = re.compile(r"\b(timed|memory_bandwidth|synchronize)\(")


def test_every_notebook_of_the_toc_is_listed():
    listed = set(execute_book.book_notebooks())
    toc = (ROOT / "_toc.yml").read_text()
    in_toc = {m for m in re.findall(r"file:\s*(\S+)", toc) if (ROOT / f"{m}.ipynb").exists()}
    assert in_toc and listed == in_toc


def test_pages_that_time_themselves_run_alone():
    timing = set()
    for name in execute_book.book_notebooks():
        nb = nbformat.read(ROOT / f"{name}.ipynb", as_version=4)
        if any(c.cell_type == "code" and TIMERS.search(c.source) for c in nb.cells):
            timing.add(name)
    assert timing, "no page calls llmlab's timers: the pattern is out of date"
    missing = timing - execute_book.TIMED_PAGES
    assert not missing, f"these pages time themselves but would share the cores: {sorted(missing)}"
    shared, alone = execute_book.order(execute_book.book_notebooks(), jobs=2)
    assert set(alone) == execute_book.TIMED_PAGES & set(execute_book.book_notebooks())
    assert not set(shared) & set(alone)
    assert execute_book.order(["a", "b"], jobs=1) == ([], ["a", "b"])


def test_bad_arguments_are_refused_with_a_reason():
    run = lambda *a: subprocess.run([sys.executable, "scripts/execute_book.py", *a], cwd=ROOT,
                                    capture_output=True, text=True)
    result = run("--only", "chapters/99_nothing")
    assert result.returncode == 2 and "99_nothing" in result.stderr and "chapters/" in result.stderr
    result = run("--jobs", "0")
    assert result.returncode == 2 and "at least 1" in result.stderr


def test_the_build_reads_the_cache_that_the_script_fills():
    config = (ROOT / "_config.yml").read_text()
    assert re.search(r"execute_notebooks:\s*cache", config)
    assert "cache: _build/.jupyter_cache" in config
    makefile = (ROOT / "Makefile").read_text()
    book = makefile.split("\nbook:", 1)[1].split("\n\n", 1)[0]
    assert book.index("scripts/execute_book.py") < book.index("jupyter-book build")


@pytest.mark.skipif(not (ROOT / "_build" / ".jupyter_cache").exists(), reason="needs `make book` first")
def test_the_last_build_executed_every_notebook_through_the_script():
    """Every notebook of the book is in the cache as the script executed it, with today's code:
    the build then had nothing left to run one at a time."""
    from jupyter_cache import get_cache

    cache = get_cache(str(ROOT / "_build" / ".jupyter_cache"))
    stale, by_build = [], []
    for name in execute_book.book_notebooks():
        try:
            record = cache.match_cache_notebook(nbformat.read(ROOT / f"{name}.ipynb", as_version=4))
        except KeyError:
            stale.append(name)
            continue
        if record.data.get("executed_by") != "scripts/execute_book.py":
            by_build.append(name)
        elif name in execute_book.TIMED_PAGES:
            assert record.data["kernels_at_once"] == 1, name
    assert not stale, f"not in the cache with their current code (run make book): {stale}"
    assert not by_build, f"executed by the build one at a time, not by the script: {by_build}"


def test_a_build_measures_the_bandwidth_once(tmp_path, monkeypatch):
    """Every kernel of a run reads and writes one bandwidth file (chapters 10, 10b and 11 then quote one
    measurement); a fresh build deletes it first, a partial run (--keep, --only) keeps it."""
    monkeypatch.setenv("LLMLAB_BANDWIDTH_FILE", "")         # whatever it was comes back after the test
    path = tmp_path / "bandwidth.json"
    path.write_text("{}")
    assert execute_book.one_bandwidth(path, fresh=False) == path and path.exists()
    assert execute_book.os.environ["LLMLAB_BANDWIDTH_FILE"] == str(path)
    execute_book.one_bandwidth(path, fresh=True)
    assert not path.exists() and execute_book.os.environ["LLMLAB_BANDWIDTH_FILE"] == str(path)
    assert execute_book.BANDWIDTH_FILE.parent.name == "_build"
