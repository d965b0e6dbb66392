"""Notebooks that work opened alone, and one repository address everywhere.

scripts/sync_notebooks.py writes every notebook's setup cell from _config.yml's repository address and
puts the diagrams into the notebooks (inline PNG data). Checked here: the committed notebooks are what
it writes, it changes nothing when run twice, and the README, pyproject.toml and the setup cells give
the same address as _config.yml. (tests/test_book_browser.py checks that the book shows such an image.)
"""
import base64
import re
import shutil
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml
from script_loader import load_file

ROOT = Path(__file__).resolve().parents[1]
sync = load_file(ROOT / "scripts" / "sync_notebooks.py")

URL = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


@pytest.fixture(scope="module")
def figures():
    """figures/generated/, drawn by the figure scripts if `make figures` has not drawn it."""
    folder = ROOT / "figures" / "generated"
    wanted = {p.stem + ".png" for p in (ROOT / "figures").glob("ch*.py")}
    if not folder.is_dir() or not wanted <= {p.name for p in folder.glob("*.png")}:
        sync.draw_figures(ROOT)
    return folder


def test_committed_notebooks_are_in_sync(figures, capsys):
    code = sync.main(["--check", "--no-figures"])
    assert code == 0, capsys.readouterr().out + "\nrun: .venv/bin/python scripts/sync_notebooks.py"


def test_no_notebook_points_at_files_around_it():
    for path in sync.notebooks(ROOT):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "markdown":
                assert "figures/generated" not in cell.source, f"{path.name}: a diagram that a lone notebook cannot show"


def make_copy(tmp_path, figures) -> Path:
    """A copy of the repository's parts the script reads, with one chapter in the old form."""
    copy = tmp_path / "repo"
    (copy / "chapters").mkdir(parents=True)
    (copy / "practise").mkdir()
    shutil.copy(ROOT / "_config.yml", copy)
    shutil.copytree(figures, copy / "figures" / "generated")
    svg = sorted(figures.glob("*.png"))[0].stem + ".svg"
    setup = nbformat.v4.new_code_cell("# an old setup cell\n%pip install llmlab")
    setup.metadata["tags"] = ["colab-setup", "hide-cell"]
    text = nbformat.v4.new_markdown_cell(f"# Title\n\n![A diagram](../figures/generated/{svg})\n\nText.")
    nbformat.write(nbformat.v4.new_notebook(cells=[setup, text, nbformat.v4.new_code_cell("1 + 1")]),
                   copy / "chapters" / "01_x.ipynb")
    return copy


def test_sync_inlines_diagrams_and_writes_the_setup_cell_once(tmp_path, figures, capsys):
    copy = make_copy(tmp_path, figures)
    assert sync.main(["--root", str(copy), "--check"]) == 1             # the old form is out of date
    assert sync.main(["--root", str(copy), "--no-figures"]) == 0
    first = (copy / "chapters" / "01_x.ipynb").read_text()
    assert sync.main(["--root", str(copy), "--no-figures"]) == 0          # a second run changes nothing
    assert (copy / "chapters" / "01_x.ipynb").read_text() == first
    assert sync.main(["--root", str(copy), "--check"]) == 0
    nb = nbformat.reads(first, as_version=4)
    assert nb.cells[0].source == sync.setup_source(URL)
    assert nb.cells[0].metadata["tags"] == ["colab-setup", "remove-cell"]   # run in Colab, left out of the page
    [(data, name)] = re.findall(r'!\[A diagram\]\(data:image/png;base64,([^ ]+) "([^"]+)"\)', nb.cells[1].source)
    assert base64.b64decode(data) == (figures / name.replace(".svg", ".png")).read_bytes()
    assert nb.cells[1].source.endswith("\n\nText.")


def test_sync_refuses_a_diagram_no_script_draws(tmp_path, figures, capsys):
    copy = make_copy(tmp_path, figures)
    nb = nbformat.read(copy / "chapters" / "01_x.ipynb", as_version=4)
    nb.cells[1].source += "\n\n![Missing](../figures/generated/ch99_nothing.svg)"
    nbformat.write(nb, copy / "chapters" / "01_x.ipynb")
    assert sync.main(["--root", str(copy), "--no-figures"]) == 1
    assert "ch99_nothing.png" in capsys.readouterr().err


def test_one_repository_address():
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", URL), URL
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["urls"]["Repository"] == URL
    readme = (ROOT / "README.md").read_text()
    addresses = set(re.findall(r"git\+(https://[^\s\"']+)", readme))
    assert addresses == {URL}, f"README.md installs from {addresses}, _config.yml says {URL}"
    assert "<repository URL>" not in readme
    for path in sync.notebooks(ROOT):
        [setup] = [c for c in nbformat.read(path, as_version=4).cells if "colab-setup" in c.metadata.get("tags", [])]
        assert f"git+{URL}\"" in setup.source, f"{path.name}: the setup cell installs from elsewhere"


def test_the_setup_cell_stays_out_of_the_book_page():
    """The setup cell is tagged remove-cell: no "Show code cell content" bar above a chapter's title."""
    for path in sync.notebooks(ROOT):
        cells = nbformat.read(path, as_version=4).cells
        [setup] = [c for c in cells if "colab-setup" in c.metadata.get("tags", [])]
        assert "remove-cell" in setup.metadata["tags"], path.name
        assert not {"hide-cell", "hide-input"} & set(setup.metadata["tags"]), path.name
