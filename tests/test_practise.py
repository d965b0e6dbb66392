"""The practise copies (practise/, the chapters with solutions stubbed) are committed for Colab:
they must match what scripts/make_practise.py writes from today's chapters."""
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import make_practise  # noqa: E402


def test_every_chapter_has_a_current_practise_copy():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_practise.py"), "--check"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_notices_a_stale_copy(tmp_path, monkeypatch):
    chapter = make_practise.chapters()[1]
    fresh = make_practise.practise_copy(chapter)
    stale = nbformat.from_dict(fresh)
    stale.cells[-1].source += "\n# edited after the copy was made"
    assert make_practise.comparable(stale) != make_practise.comparable(fresh)


def test_practise_copies_hold_no_solution_and_keep_the_checks():
    for chapter in make_practise.chapters():
        source = nbformat.read(chapter, as_version=4)
        copy = nbformat.read(ROOT / "practise" / chapter.name, as_version=4)
        solutions = [c for c in source.cells if "solution" in c.get("metadata", {}).get("tags", [])]
        assert not any("solution" in c.get("metadata", {}).get("tags", []) and c.cell_type == "markdown"
                       for c in copy.cells), chapter.name
        checks = [c.source for c in source.cells if c.cell_type == "code" and "check(\"" in c.source]
        copied = [c.source for c in copy.cells if c.cell_type == "code"]
        for check in checks:
            assert check in copied, (chapter.name, check)
        if solutions:
            assert any("NotImplementedError" in c.source for c in copy.cells), chapter.name
        assert copy.cells[1].source.startswith("**Practise copy.**") or copy.cells[0].source.startswith("**Practise copy.**")


def test_a_lab_gets_a_practise_copy_only_if_it_has_exercises(tmp_path, monkeypatch):
    """A lab (NN_name_lab.ipynb) holds evidence, not exercises: no practise copy, unless it has an exercise."""
    def notebook(name, *cells):
        nbformat.write(nbformat.v4.new_notebook(cells=list(cells)), tmp_path / name)

    title = nbformat.v4.new_markdown_cell("# 1. A lesson")
    solution = nbformat.v4.new_code_cell("def double(x):\n    return 2 * x")
    solution.metadata["tags"] = ["solution"]
    notebook("01_x.ipynb", title, solution, nbformat.v4.new_code_cell('check("double", double)'))
    notebook("01_x_lab.ipynb", nbformat.v4.new_markdown_cell("# Lab: evidence"), nbformat.v4.new_code_cell("1 + 1"))
    notebook("02_y_lab.ipynb", nbformat.v4.new_markdown_cell("# Lab: with an exercise"),
             nbformat.v4.new_code_cell('check("triple", lambda x: 3 * x)'))
    monkeypatch.setattr(make_practise, "CHAPTERS", tmp_path)
    assert [p.name for p in make_practise.chapters()] == ["01_x.ipynb", "02_y_lab.ipynb"]
    for lab in sorted(make_practise.CHAPTERS.glob("*_lab.ipynb")):
        assert make_practise.is_lab(lab)
