"""Exercises and figures are numbered per chapter, as in a printed book: Exercise 5.1, Figure 5.2.

The chapter comes from the file name (05_self_attention and its lab 05_self_attention_lab -> 5,
10b_... -> 10b, 00_setup -> 0), and the lab continues its lesson's count; pages without a chapter
number (the front page, the appendices) count their own items from 1 (_ext/llmlab_numbers.py).
One test builds a tiny book with the project's _config.yml and extensions; the others read the
whole book in _build/html, which `make test` builds first.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "_ext"))
from llmlab_numbers import chapter_number  # noqa: E402

# "Exercise 5.1 ", "Figure 10b.2 ": the number Sphinx writes in front of a title or a caption
CAPTION_NUMBER = re.compile(r'<span class="caption-number">(\w+) ([\w.]+) </span>')
# a diagram in a markdown cell: a line that is one image with a description
DIAGRAM = re.compile(r"^!\[[^\]]+\]\([^)]+\)\s*$", re.M)
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def numbered(html: str) -> list:
    """(kind, number) of every numbered title and caption of a page, in reading order."""
    return CAPTION_NUMBER.findall(html)


def cell(source, kind="markdown"):
    extra = {"execution_count": None, "outputs": []} if kind == "code" else {}
    return {"cell_type": kind, "metadata": {}, "source": source, **extra}


def notebook(*sources):
    return json.dumps({"cells": [cell(s) for s in sources], "nbformat": 4, "nbformat_minor": 5,
                       "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}})


def diagram(name):
    return f'![The {name} diagram](data:image/png;base64,{PNG} "{name}.svg")'


def exercise(label, title):
    return f"```{{exercise}} {title}\n:label: {label}\nDo it.\n```\n"


@pytest.fixture(scope="module")
def tiny_book(tmp_path_factory):
    """Chapter 5 (a lesson and its lab), chapter 10b and an appendix, built with the book's config."""
    book = tmp_path_factory.mktemp("numbers_book")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"] = {"execute_notebooks": "off"}
    config["exclude_patterns"] = ["_build/*"]
    config["sphinx"]["local_extensions"] = {name: str(ROOT / path) for name, path in config["sphinx"]["local_extensions"].items()}
    config["sphinx"]["config"]["html_static_path"] = [str(ROOT / p) for p in config["sphinx"]["config"]["html_static_path"]]
    (book / "_config.yml").write_text(yaml.safe_dump(config))
    (book / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n  - caption: Chapters\n    chapters:\n"
        "      - file: chapters/05_attention\n        sections:\n          - file: chapters/05_attention_lab\n"
        "      - file: chapters/10b_weights\n      - file: chapters/appendix_notes\n")
    (book / "intro.md").write_text(f"# A tiny book\n\n{diagram('front')}\n")
    chapters = book / "chapters"
    chapters.mkdir()
    (chapters / "05_attention.ipynb").write_text(notebook(
        f"# 5. Attention\n\n{diagram('ch05_idea')}\n\nSome text.\n\n{diagram('ch05_heads')}\n",
        "## Exercises\n\n" + exercise("ch05-ex-a", "First") + "\n" + exercise("ch05-ex-b", "Second")
        + "\n```{solution} ch05-ex-a\n:class: dropdown\nThe answer.\n```\n"))
    (chapters / "05_attention_lab.ipynb").write_text(notebook(
        f"# Lab: attention\n\n{diagram('ch05_lab')}\n\n{diagram('ch05_idea')}\n\n"   # the lesson's diagram again
        + exercise("ch05-ex-lab", "In the lab")))
    (chapters / "10b_weights.ipynb").write_text(notebook(
        "# 10b. Weights\n\n" + exercise("ch10b-ex-a", "Blocks")
        + "\nSee {numref}`fig-ch05-lab` and {numref}`ch05-ex-lab`.\n"))
    (chapters / "appendix_notes.md").write_text(f"# Notes\n\n{diagram('notes')}\n")
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(jupyter_book), "build", "-W", "--keep-going", str(book)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return book / "_build" / "html"


def test_numbers_run_per_chapter_through_lesson_and_lab(tiny_book):
    page = lambda name: (tiny_book / f"{name}.html").read_text(encoding="utf-8")  # noqa: E731
    assert numbered(page("chapters/05_attention")) == [
        ("Figure", "5.1"), ("Figure", "5.2"), ("Exercise", "5.1"), ("Exercise", "5.2")]
    assert numbered(page("chapters/05_attention_lab")) == [("Figure", "5.3"), ("Figure", "5.4"), ("Exercise", "5.3")]
    assert numbered(page("chapters/10b_weights")) == [("Exercise", "10b.1")]
    assert numbered(page("chapters/appendix_notes")) == [("Figure", "1")]
    assert numbered(page("intro")) == [("Figure", "1")]


def test_captions_solutions_and_references_use_the_same_numbers(tiny_book):
    lesson = (tiny_book / "chapters" / "05_attention.html").read_text(encoding="utf-8")
    assert '<span class="caption-text">The ch05_idea diagram</span>' in lesson, "a diagram's description is its caption"
    assert 'id="fig-ch05-idea"' in lesson
    lab = (tiny_book / "chapters" / "05_attention_lab.html").read_text(encoding="utf-8")
    assert 'id="fig-ch05-idea"' in lab, "a diagram shown again on another page keeps its anchor there"
    assert re.search(r"Solution to<a [^>]*> Exercise 5\.1 \(First\)</a>", lesson), "the solution names its exercise's number"
    weights = (tiny_book / "chapters" / "10b_weights.html").read_text(encoding="utf-8")
    assert re.search(r'href="05_attention_lab.html#fig-ch05-lab"[^>]*><span class="std std-numref">Figure 5\.3</span>', weights)
    assert re.search(r'href="05_attention_lab.html#ch05-ex-lab"[^>]*><span class="std std-numref">Exercise 5\.3</span>', weights)


def chapters_in_toc() -> dict:
    """chapter number -> its pages (lesson, then lab), from _toc.yml."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    chapters = {}

    def walk(items):
        for item in items:
            number = chapter_number(item["file"])
            if number is not None:
                chapters.setdefault(number, []).append(item["file"])
            walk(item.get("sections", []))

    for part in toc["parts"]:
        walk(part["chapters"])
    return chapters


def built(page: str) -> str:
    path = HTML / f"{page}.html"
    if not path.exists():
        pytest.fail(f"{path} is missing: build the book first with `make book` (make test does it)")
    return path.read_text(encoding="utf-8")


def shown_diagrams(page: str) -> int:
    """How many diagrams the page's markdown cells show (a hidden cell's would not be built)."""
    cells = json.loads((ROOT / f"{page}.ipynb").read_text())["cells"]
    return sum(len(DIAGRAM.findall("".join(c["source"]))) for c in cells if c["cell_type"] == "markdown"
               and not {"remove-cell", "remove-input"} & set(c["metadata"].get("tags", [])))


@pytest.mark.parametrize("chapter,pages", sorted(chapters_in_toc().items()), ids=lambda x: str(x))
def test_every_exercise_and_figure_carries_its_chapter_number(chapter, pages):
    """In the built book: chapter 5's exercises read Exercise 5.1, 5.2, ... through the lesson and its
    lab, its figures Figure 5.1, 5.2, ..., and every diagram of the pages is a numbered figure."""
    counts = {}
    for page in pages:
        items = numbered(built(page))
        for kind, number in items:
            counts[kind] = counts.get(kind, 0) + 1
            assert number == f"{chapter}.{counts[kind]}", \
                f"{page}: {kind} {number} should be {kind} {chapter}.{counts[kind]} (numbered per chapter, the lab after its lesson)"
        figures = sum(kind == "Figure" for kind, _ in items)
        assert figures >= shown_diagrams(page), f"{page}: {shown_diagrams(page)} diagrams but {figures} numbered figures"


def test_the_book_numbers_its_exercises():
    exercises = [n for pages in chapters_in_toc().values() for page in pages
                 for kind, n in numbered(built(page)) if kind == "Exercise"]
    assert len(exercises) >= 50 and "5.1" in exercises, exercises


# The practise copies (scripts/make_practise.py) head every exercise the way the book titles it.
sys.path.insert(0, str(ROOT / "scripts"))
import make_practise  # noqa: E402

HEADING = re.compile(r"^\*\*Exercise ([\w.]+) \((.*)\)\*\*$", re.M)


def test_practise_headings_are_numbered_as_the_book_numbers_exercises(tmp_path):
    import nbformat
    md = nbformat.v4.new_markdown_cell
    hidden = md(exercise("hidden", "Not built"))
    hidden.metadata["tags"] = ["remove-cell"]
    lesson = nbformat.v4.new_notebook(cells=[md("# 7. Norms"), md(exercise("a", "One") + "\n" + exercise("b", "Two")), hidden,
                                             md("```{exercise} Unnumbered\n:label: c\n:nonumber:\nText.\n```")])
    lab = nbformat.v4.new_notebook(cells=[md("# Lab: norms"), md(exercise("d", "In the lab"))])
    nbformat.write(lesson, tmp_path / "07_norms.ipynb")
    nbformat.write(lab, tmp_path / "07_norms_lab.ipynb")
    make_practise.number_exercises(lesson, tmp_path / "07_norms.ipynb")
    make_practise.number_exercises(lab, tmp_path / "07_norms_lab.ipynb")
    headings = lambda nb: [m.groups() for c in nb.cells for m in HEADING.finditer(c.source)]  # noqa: E731
    assert headings(lesson) == [("7.1", "One"), ("7.2", "Two")]
    assert lesson.cells[1].source.startswith("**Exercise 7.1 (One)**\n\n```{exercise} One\n")
    assert headings(lab) == [("7.3", "In the lab")], "a lab continues its lesson's count"
    appendix = nbformat.v4.new_notebook(cells=[md(exercise("e", "Extra"))])
    make_practise.number_exercises(appendix, tmp_path / "appendix_extra.ipynb")
    assert headings(appendix) == [("1", "Extra")]


@pytest.mark.parametrize("chapter", make_practise.chapters(), ids=lambda p: p.name)
def test_a_practise_copy_names_its_exercises_as_the_built_page_does(chapter):
    """The committed practise copy's headings are the built page's exercise titles, number for number."""
    import html as html_module

    import nbformat
    copy = nbformat.read(ROOT / "practise" / chapter.name, as_version=4)
    in_copy = [m.groups() for c in copy.cells if c.cell_type == "markdown" for m in HEADING.finditer(c.source)]
    page = built(f"chapters/{chapter.stem}")
    in_book = [(n, html_module.unescape(re.sub(r"<[^>]+>", "", t)).strip())
               for n, t in re.findall(r'<span class="caption-number">Exercise ([\w.]+) </span> \((.*?)\)</p>', page)]
    assert in_copy == in_book, f"practise/{chapter.name} heads its exercises {in_copy}, the book {in_book}: run scripts/make_practise.py"
