"""The strict build command stops on a failing notebook (so a broken chapter cannot land)."""
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")


def make_book(folder: Path, code: str) -> Path:
    """A one-chapter book with the project's own _config.yml and a notebook running `code`."""
    folder.mkdir()
    shutil.copy(ROOT / "_config.yml", folder / "_config.yml")
    for shared in ["assets", "_ext"]:   # the vendored scripts and the book's Sphinx extension
        (folder / shared).symlink_to(ROOT / shared)
    (folder / "intro.md").write_text("# A test book\n")
    (folder / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: chapter\n")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A chapter"),
                                               nbformat.v4.new_code_cell(code)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, folder / "chapter.ipynb")
    return folder


def build(folder: Path) -> subprocess.CompletedProcess:
    # The same flags as the Makefile's book target.
    return subprocess.run([str(JUPYTER_BOOK), "build", "--all", "-W", "--keep-going", str(folder)],
                          capture_output=True, text=True, timeout=300)


def test_a_working_notebook_builds(tmp_path):
    result = build(make_book(tmp_path / "good", "print(6 * 7)"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "42" in (tmp_path / "good" / "_build" / "html" / "chapter.html").read_text()


def test_a_failing_notebook_fails_the_build(tmp_path):
    result = build(make_book(tmp_path / "bad", "raise ValueError('this chapter is broken')"))
    assert result.returncode != 0, "a notebook that raises must make the strict build fail"
    assert "Executing notebook failed" in result.stdout + result.stderr
    reports = list((tmp_path / "bad" / "_build" / "html" / "reports").rglob("*.log"))
    assert any("this chapter is broken" in report.read_text() for report in reports), "the traceback should be in the execution report"


def test_views_in_the_built_book_carry_only_their_data_and_still_draw(tmp_path):
    """In the built book every page loads the views' scripts once, in its head; a view carries only its
    data and the call that draws it, and draws itself from those scripts in the browser."""
    import os

    from browser import open_in_browser

    code = ("from llmlab.attention import causal_mask\nfrom llmlab.visualization import mask_view\n"
            "mask_view({'causal': causal_mask(4)})")
    folder = make_book(tmp_path / "views", code)
    result = subprocess.run([str(JUPYTER_BOOK), "build", "--all", "-W", "--keep-going", str(folder)],
                            capture_output=True, text=True, timeout=300, env={**os.environ, "LLMLAB_BOOK_BUILD": "1"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    page = folder / "_build" / "html" / "chapter.html"
    text = page.read_text()
    assert '<script src="_static/llmlab-views.js' in text and "llmlab-views.css" in text
    assert text.count("L.el = function") == 0 and "window.llmlab.mount(root, 'mask'" in text   # no inline copy
    assert "L.el = function" in (folder / "_build" / "html" / "_static" / "llmlab-views.js").read_text()
    drawn = open_in_browser(page, js="document.body.dataset.drawn = document.querySelectorAll('[data-rendered=yes]').length")
    assert not drawn.errors, drawn.errors
    assert 'data-drawn="1"' in drawn.dom
