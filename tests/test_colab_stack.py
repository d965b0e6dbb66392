"""A reader's Colab, rehearsed offline: the LOWEST versions llmlab's ranges allow, and each notebook alone.

A fresh virtual environment gets a Colab-like stack: the pinned CPU torch of requirements.txt, the
lowest transformers of pyproject.toml's `reference` range, numpy 2.0, ipywidgets 7.7, ipykernel 6.17
(what Colab ships is older than what the book is built with), and matplotlib without a CJK font.
Then every notebook below is copied alone into an empty folder and run top to bottom, after the
commands of its own setup cell, run as written except that the repository address is replaced by this
clone (git+file://, so the committed tree is what gets installed). Checked for each: no error, no
`findfont` line, at most a few lines on stderr, every image in its markdown carried by the notebook
in a form Colab shows (inline PNG or JPEG data: Colab shows neither SVG nor cell attachments in
markdown), every image of the rendered notebook loaded, and that installing llmlab kept the stack's
own versions (Colab's ipywidgets 7 must not be replaced).

The stack (not llmlab) is kept in ~/.cache/llmlab-colab-stack/<key>/ ($LLMLAB_COLAB_STACK), keyed by the
stack (which reads the lowest transformers from pyproject.toml) and outside the checkout, so a second run,
from any clone, only reinstalls llmlab; the converted
models are the book's own (~/.cache/llmlab or $LLMLAB_CACHE). LLMLAB_COLAB_TIMING=1 starts from an empty model cache and prints
the time from "open in Colab" to the first real cell: the setup cell's installs plus the conversion
of the two models.

LLMLAB_COLAB_NOTEBOOKS=/path/to/a/copy runs the notebooks of a copy of the repository instead (for
example one that scripts/sync_notebooks.py --root rewrote), with llmlab still installed from this clone.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_ROOT = Path(os.environ.get("LLMLAB_COLAB_NOTEBOOKS") or ROOT)
# The chapters that compare with transformers (chapter 10b does so only with the hub, which is not
# reachable here); chapter 8 also has a live explorer (ipywidgets); and one practise copy.
NOTEBOOKS = ["chapters/02_tokens_and_bpe.ipynb", "chapters/08_the_whole_stack.ipynb", "practise/03_embeddings.ipynb"]
EXPLORER = "chapters/08_the_whole_stack.ipynb"
COLAB_LIKE = ["numpy==2.0.2", "ipywidgets==7.7.1", "ipykernel==6.17.1", "matplotlib", "nbclient", "nbformat", "nbconvert"]
MAX_STDERR_LINES = 5

# Run in the kernel before the notebook: the machine's CJK fonts disappear, as on Colab.
NO_CJK_FONT = ("from matplotlib import font_manager\n"
               "font_manager.fontManager.ttflist = [f for f in font_manager.fontManager.ttflist if 'CJK' not in f.name]\n")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout of the repository")]


def lowest_allowed(requirement: str) -> str:
    """'transformers>=4.50' -> 'transformers==4.50'; the lower bound of a range, pinned."""
    match = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)(,.*)?", requirement.strip())
    assert match, f"{requirement!r} has no >= lower bound to rehearse"
    return f"{match.group(1)}=={match.group(2)}"


def stack() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [transformers] = [r for r in pyproject["project"]["optional-dependencies"]["reference"]
                      if r.startswith("transformers")]
    torch = next(line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
                 if line.strip().startswith("torch=="))
    return [torch, lowest_allowed(transformers), *COLAB_LIKE]


def setup_cell_commands(notebook: Path) -> list[list[str]]:
    """The %pip install lines of a notebook's setup cell, as argument lists, with this clone's address."""
    nb = nbformat.read(notebook, as_version=4)
    [cell] = [c for c in nb.cells if "colab-setup" in c.get("metadata", {}).get("tags", [])]
    commands = []
    for line in cell.source.splitlines():
        if line.strip().startswith("%pip install"):
            args = shlex.split(line.strip().removeprefix("%pip install"))
            commands.append([re.sub(r"git\+https://\S+?(?=\"|$)", f"git+file://{ROOT}", a) if "git+" in a else a
                             for a in args])
    return commands


def markdown_images(nb) -> list[tuple[str, bool]]:
    """(reference, shown in a lone notebook in Colab) for every image of every markdown cell."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        refs = re.findall(r"!\[[^\]]*\]\(([^)\s]+)", cell.source) + re.findall(r"<img[^>]*src=[\"']([^\"']+)", cell.source)
        found += [(ref[:60], ref.startswith(("data:image/png;base64,", "data:image/jpeg;base64,"))) for ref in refs]
    return found


def test_markdown_images_must_be_carried():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        '![a](data:image/png;base64,iVBO "a.svg") ![b](../figures/b.svg) ![c](attachment:c.png) ![d](data:image/svg+xml;base64,PD)')])
    assert [carried for _, carried in markdown_images(nb)] == [True, False, False, False]


def test_the_set_has_what_it_rehearses():
    for notebook in NOTEBOOKS[:2]:
        assert "transformers" in (NOTEBOOK_ROOT / notebook).read_text()
    assert "_explorer(" in (NOTEBOOK_ROOT / EXPLORER).read_text(), f"{EXPLORER} no longer has a live explorer: pick another"
    assert any(n.startswith("practise/") for n in NOTEBOOKS)


def test_setup_commands_point_at_this_clone():
    commands = setup_cell_commands(ROOT / "chapters" / "02_tokens_and_bpe.ipynb")
    assert any(f"llmlab[reference] @ git+file://{ROOT}" in args for args in commands), commands


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    """(python of the rehearsal environment, environment variables, the versions before llmlab)."""
    key = hashlib.sha256(json.dumps([stack(), sys.version]).encode()).hexdigest()[:12]
    # Outside the checkout, like the converted models: a fresh clone on the same machine reuses the stack.
    base = Path(os.environ.get("LLMLAB_COLAB_STACK") or Path.home() / ".cache" / "llmlab-colab-stack")
    home = base / key
    # The converted models do not depend on the stack: the book's own cache (make models) is reused,
    # unless LLMLAB_COLAB_TIMING=1 asks for a fresh one, to time the conversions a new Colab session does.
    timing = os.environ.get("LLMLAB_COLAB_TIMING") == "1"
    cache = tmp_path_factory.mktemp("llmlab-cache") if timing else \
        Path(os.environ.get("LLMLAB_CACHE") or Path.home() / ".cache" / "llmlab")
    venv, py = home / "venv", home / "venv" / "bin" / "python"
    for old in base.glob("*/venv"):                     # stacks of other keys
        if old.parent != home:
            shutil.rmtree(old.parent, ignore_errors=True)
    timings = {}

    def pip(*args):
        start = time.perf_counter()
        proc = subprocess.run([str(py), "-m", "pip", "install", "-q", *args], capture_output=True, text=True)
        assert proc.returncode == 0, f"pip install {' '.join(args)}\n{proc.stderr[-4000:]}"
        return time.perf_counter() - start

    if not (home / "ready").exists():
        shutil.rmtree(home, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip("--upgrade", "pip")
        pip(*stack())
        (home / "ready").write_text("\n".join(stack()) + "\n")
    subprocess.run([str(py), "-m", "pip", "uninstall", "-y", "-q", "llmlab"], capture_output=True)
    versions = "import json, torch, transformers, numpy, ipywidgets; print(json.dumps({m.__name__: m.__version__ for m in (torch, transformers, numpy, ipywidgets)}))"
    before = json.loads(subprocess.run([str(py), "-c", versions], capture_output=True, text=True, check=True).stdout)

    timings["setup cell installs"] = sum(pip(*args) for args in setup_cell_commands(NOTEBOOK_ROOT / NOTEBOOKS[0]))
    after = json.loads(subprocess.run([str(py), "-c", versions], capture_output=True, text=True, check=True).stdout)
    ipython = home / "ipython"
    (ipython / "profile_default" / "startup").mkdir(parents=True, exist_ok=True)
    (ipython / "profile_default" / "startup" / "00-no-cjk-font.py").write_text(NO_CJK_FONT)
    env = {**os.environ, "PYTHONPATH": "", "MPLBACKEND": "module://matplotlib_inline.backend_inline",
           "LLMLAB_CACHE": str(cache), "IPYTHONDIR": str(ipython)}
    if timing:
        for name in ("smollm2-135m", "gemma3-270m"):
            start = time.perf_counter()
            subprocess.run([str(py), "-c", f"import llmlab; llmlab.load({name!r})"], env=env, cwd=tmp_path_factory.mktemp("load"),
                           check=True, capture_output=True)
            timings[f"first load of {name} (conversion)"] = time.perf_counter() - start
    print(f"\nColab-like stack {before}; time to the first real cell:",
          ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()), f"(total {sum(timings.values()):.0f} s)")
    return py, env, before, after


def test_installing_llmlab_keeps_the_stack(colab):
    py, env, before, after = colab
    assert after == before, f"installing llmlab replaced the preinstalled {before} by {after}"
    site = subprocess.run([str(py), "-c", "import llmlab; print(llmlab.__file__)"], capture_output=True, text=True,
                          env=env, cwd="/").stdout
    assert str(py.parents[1]) in site, f"llmlab must come from the installed copy, not {site}"


RUNNER = """
import sys, time, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
start = time.perf_counter()
NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
nbformat.write(nb, sys.argv[1])
print(f"executed in {time.perf_counter() - start:.1f} s")
"""


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_notebook_runs_alone_on_the_colab_stack(colab, notebook, tmp_path):
    py, env, before, _ = colab
    source = NOTEBOOK_ROOT / notebook
    images = markdown_images(nbformat.read(source, as_version=4))
    assert all(carried for _, carried in images), \
        f"{notebook}: images that a lone notebook cannot show: {[ref for ref, carried in images if not carried]}"
    (tmp_path / source.name).write_bytes(source.read_bytes())        # alone in an empty folder
    proc = subprocess.run([str(py), "-c", RUNNER, source.name], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0, f"{notebook} failed on {before}:\n{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"
    print(f"{notebook} on {before}: {proc.stdout.strip()}")
    executed = nbformat.read(tmp_path / source.name, as_version=4)
    texts, stderr = [], []
    for cell in executed.cells:
        for output in cell.get("outputs", []):
            text = output.get("text", "") or "".join(str(v) for v in output.get("data", {}).values())
            texts.append(text)
            if output.get("name") == "stderr":
                stderr += [line for line in output["text"].splitlines() if line.strip()]
    assert not [t for t in texts if "findfont" in t], f"{notebook}: findfont lines in the outputs"
    assert len(stderr) <= MAX_STDERR_LINES, f"{notebook}: {len(stderr)} lines on stderr:\n" + "\n".join(stderr[:40])

    # What a reader sees: the executed notebook as Jupyter renders it (nbconvert), opened offline in
    # Chromium; every image of the page (diagrams, plots) must have loaded.
    html = subprocess.run([str(py), "-m", "nbconvert", "--to", "html", source.name], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert html.returncode == 0, html.stderr[-2000:]
    from browser import open_in_browser

    page = open_in_browser(tmp_path / f"{source.stem}.html", js=COUNT_IMAGES, width=1000, height=1500, wait_ms=3000)
    shown, total = (int(re.search(f'data-{k}="(\\d+)"', page.dom).group(1)) for k in ("shown", "images"))
    markdown_refs = len(images)
    assert total >= markdown_refs and shown == total, f"{notebook}: {total - shown} of {total} images are broken"


COUNT_IMAGES = """setTimeout(function () {
  var images = document.querySelectorAll('img'), shown = 0;
  images.forEach(function (i) { if (i.complete && i.naturalWidth > 0) shown++; });
  document.body.dataset.images = images.length;
  document.body.dataset.shown = shown;
}, 1500);"""
