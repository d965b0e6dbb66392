"""Build one chapter alone, strictly, the way the book is built, and screenshot the page.

    .venv/bin/python scripts/preview_chapter.py chapters/05_self_attention.ipynb [--out /tmp/preview]

Prints the execution time and any warning, writes OUT/<chapter>.png (a full-page screenshot in
headless Chromium) and leaves the built page in OUT/<chapter>/_build/html. The notebook in
chapters/ is not modified. Used while writing a chapter; the real build is `make book`.
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


def json_markdown(text: str) -> str:
    """The markdown cells of a notebook's JSON text, joined."""
    return "\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("notebook")
    parser.add_argument("--out", default="/tmp/preview")
    parser.add_argument("--height", type=int, default=6000, help="screenshot height in pixels")
    args = parser.parse_args()
    notebook = Path(args.notebook).resolve()
    book = Path(args.out) / notebook.stem
    shutil.rmtree(book, ignore_errors=True)
    (book / "chapters").mkdir(parents=True)
    # the page is executed here, every time: the book's own build reads an execution cache that
    # scripts/execute_book.py fills, which a preview must neither read (stale) nor write
    config = (ROOT / "_config.yml").read_text()
    config = re.sub(r"execute_notebooks:\s*cache", "execute_notebooks: force", config)
    config = re.sub(r"\n\s*cache: _build/\.jupyter_cache", "", config)
    assert "execute_notebooks: force" in config, "_config.yml has no execute_notebooks setting to override"
    (book / "_config.yml").write_text(config)
    (book / "intro.md").write_text("# Preview\n")
    for name in ["assets", "figures", "glossary", "_ext"]:
        if (ROOT / name).exists():
            (book / name).symlink_to(ROOT / name)
    shutil.copy(notebook, book / "chapters" / notebook.name)
    # every other page of chapters/ as a one-line stub with its own title, so that {doc} links from
    # this page (a lab to its lesson, to the appendices) resolve as they do in the whole book
    stubs = []
    for other in sorted((ROOT / "chapters").glob("*")):
        if other.suffix not in (".ipynb", ".md") or other.stem == notebook.stem:
            continue
        text = other.read_text(encoding="utf-8")
        stubs.append(other.stem)
        if other.suffix == ".md" and "{include}" not in text:   # an appendix page: copied as it is
            shutil.copy(other, book / "chapters" / other.name)
            continue
        markdown = json_markdown(text) if other.suffix == ".ipynb" else text
        title = next((line for line in markdown.splitlines() if line.startswith("# ")), f"# {other.stem}")
        # its labels too, so that {ref} links into it resolve
        labels = "".join(f"({label})=\n## {label}\n\n" for label in re.findall(r"^\(([\w-]+)\)=$", markdown, re.M))
        stub = {"cells": [{"cell_type": "markdown", "id": "stub", "metadata": {},
                           "source": f"{title}\n\n(stub for the preview)\n\n{labels}"}],
                "metadata": {"mystnb": {"execution_mode": "off"}}, "nbformat": 4, "nbformat_minor": 5}   # not run
        body = stub["cells"][0]["source"]
        (book / "chapters" / other.name).write_text(json.dumps(stub) if other.suffix == ".ipynb" else body)
    (book / "_toc.yml").write_text(f"format: jb-book\nroot: intro\nchapters:\n  - file: chapters/{notebook.stem}\n"
                                   + "".join(f"  - file: chapters/{stem}\n" for stem in stubs))
    start = time.perf_counter()
    result = subprocess.run([str(Path(sys.executable).with_name("jupyter-book")), "build", "--all", "-W",
                             "--keep-going", str(book)], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    log = result.stdout + result.stderr
    problems = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line or "Error" in line]
    print(f"build of {notebook.name}: exit {result.returncode}, {elapsed:.1f} s (execution + rendering)")
    for line in problems:
        print("  ", line)
    for report in (book / "_build" / "html" / "reports").rglob("*.log"):
        print(report.read_text()[-4000:])
    page = book / "_build" / "html" / "chapters" / f"{notebook.stem}.html"
    if page.exists() and shutil.which("chromium"):
        png = Path(args.out) / f"{notebook.stem}.png"
        subprocess.run(["chromium", *CHROMIUM_FLAGS, "--virtual-time-budget=15000",
                        f"--window-size=1100,{args.height}", f"--screenshot={png}", page.as_uri()],
                       capture_output=True, timeout=180)
        print(f"screenshot: {png}   page: {page}")
        from PIL import Image  # matplotlib depends on Pillow

        image = Image.open(png)
        for i, top in enumerate(range(0, image.height, 2000)):
            part = Path(args.out) / f"{notebook.stem}_part{i + 1}.png"
            image.crop((0, top, image.width, min(top + 2000, image.height))).save(part)
            print(f"  part {i + 1}: {part}")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
