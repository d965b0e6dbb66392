"""A reader's Colab, rehearsed offline: the LOWEST versions llmlab's ranges allow, and each notebook alone.

A fresh virtual environment gets a Colab-like stack: the pinned CPU torch of requirements.txt, the
lowest transformers of pyproject.toml's `reference` range, numpy 2.0, ipywidgets 7.7, ipykernel 6.17
(what Colab ships is older than what the book is built with), and matplotlib without a CJK font.
Then every notebook below is copied alone into an empty folder and run top to bottom, after the
commands of its own setup cell, run as written except that the repository address is replaced by this
clone (git+file://, so the committed tree is what gets installed). Checked for each: no error, no
`findfont` line, at most a few lines on stderr, no figure shown as `<Figure size ...>` text instead of a plot, every image in its markdown carried by the notebook
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

LLMLAB_COLAB_ALL=1 runs every chapter and every practise copy instead of the representative set (about
an hour on a 2-core machine). LLMLAB_COLAB_REPORT=/path/file.jsonl appends one line per notebook run
(passed, seconds, stderr lines, what failed), written before the checks so a failure is recorded too.

LLMLAB_COLAB_FLOORS=1 rehearses the floors instead: every requirement of pyproject.toml (dependencies
and the `reference` extra) installed at the lower bound of its range, torch included (below 2.13 PyPI
has only the CUDA builds of torch: they run on a CPU, but `import torch` needs the NVIDIA libraries
beside them; the floors stack takes about 7 GB). Its converted models are its own (in the stack's folder).
Both stacks read their versions from pyproject.toml, so the ranges it declares are the ranges rehearsed.
LLMLAB_COLAB_PYTHON=/path/to/python3.10 builds the stack on another interpreter (e.g. the lowest Python
that requires-python allows).
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
# The chapters that compare with transformers (chapter 2's lab, also with sentencepiece; chapter 10b does so
# only with the hub, which is not reachable here); chapter 8 also has a live explorer (ipywidgets); and one
# practise copy; and one Chinese notebook (zh/: the same code, the text and diagrams from the catalogs).
REPRESENTATIVE = ["chapters/02_tokens_and_bpe_lab.ipynb", "chapters/08_the_whole_stack.ipynb", "practise/03_embeddings.ipynb",
                  "zh/chapters/01_a_model_is_a_function.ipynb"]
EVERY = sorted(f"{folder}/{path.name}" for folder in ("chapters", "practise", "zh/chapters", "zh/practise")
               for path in (NOTEBOOK_ROOT / folder).glob("*.ipynb"))
NOTEBOOKS = EVERY if os.environ.get("LLMLAB_COLAB_ALL") == "1" else REPRESENTATIVE
EXPLORER = "chapters/08_the_whole_stack.ipynb"
FLOORS = os.environ.get("LLMLAB_COLAB_FLOORS") == "1"
PYTHON = os.environ.get("LLMLAB_COLAB_PYTHON") or sys.executable     # the stack's interpreter
# What Colab has preinstalled (older than what the book is built with); llmlab's ranges must keep it.
COLAB_LIKE = ["numpy==2.0.2", "ipywidgets==7.7.1", "ipykernel==6.17.1", "matplotlib"]
# What runs the notebooks here (and Colab's kernel, in the floors stack too).
KERNEL = ["nbclient", "nbformat", "nbconvert"]
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


def requirements() -> list[str]:
    """llmlab's ranges: pyproject.toml's dependencies and its `reference` extra (what the setup cell installs)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [r.split(";")[0].strip() for r in
            pyproject["project"]["dependencies"] + pyproject["project"]["optional-dependencies"]["reference"]]


def floors() -> list[str]:
    """Every requirement at the lower bound of its range: 'numpy>=1.26' -> 'numpy==1.26'."""
    return [lowest_allowed(r) for r in requirements()]


def stack() -> list[str]:
    """The stack before llmlab is installed (LLMLAB_COLAB_FLOORS=1: the floors; otherwise Colab's own)."""
    if FLOORS:
        return [*floors(), "ipykernel==6.17.1", *KERNEL]
    [transformers] = [lowest_allowed(r) for r in requirements() if r.startswith("transformers")]
    torch = next(line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
                 if line.strip().startswith("torch=="))
    return [torch, transformers, *COLAB_LIKE, *KERNEL]


def test_floors_are_pinnable_versions():
    """A floor is a version that exists and was rehearsed, so each range starts at a real release."""
    pins = floors()
    assert {p.split("==")[0] for p in pins} >= {"torch", "numpy", "matplotlib", "transformers", "ipywidgets"}
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[0-9][0-9.]*", p) for p in pins), pins
    assert lowest_allowed("numpy>=1.26,<3") == "numpy==1.26"


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
    assert any(n.startswith("zh/") for n in NOTEBOOKS), "the Chinese notebooks must run on the Colab stack too"


def test_setup_commands_point_at_this_clone():
    commands = setup_cell_commands(ROOT / "chapters" / "02_tokens_and_bpe.ipynb")
    assert any(f"llmlab[reference] @ git+file://{ROOT}" in args for args in commands), commands


def stubbed_calls(nb) -> list[str]:
    """Cells of a practise copy that call an exercise's stub when run (not inside check(...), a def or a lambda).

    In a practise copy each exercise raises NotImplementedError until the reader writes it, and check()
    reports that as "not attempted"; any other cell that calls the stub stops "Run all" there.
    """
    import ast

    def parse(source):
        try:
            return ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
        except SyntaxError:
            return None

    stubs, verdicts, found = set(), set(), []      # verdicts: names bound to a check's result (ok = check(...))
    for number, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or (tree := parse(cell.source)) is None:
            continue
        verdicts |= {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                     and isinstance(node.value.func, ast.Name) and node.value.func.id == "check"
                     for target in node.targets if isinstance(target, ast.Name)}
        if "exercise" in cell.get("metadata", {}).get("tags", []):
            stubs |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and "NotImplementedError" in ast.unparse(node)}
            continue

        def calls(node):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return
            # guarded: `if result.passed:` (a check's verdict), or `try: ... except NotImplementedError:`
            if isinstance(node, ast.If) and ("passed" in ast.unparse(node.test)
                                             or {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)} & verdicts):
                return
            if isinstance(node, ast.Try) and any("NotImplementedError" in ast.unparse(h.type or ast.Name("BaseException"))
                                                 for h in node.handlers):
                return
            if isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name) and node.func.id == "check":
                    return
                if isinstance(node.func, ast.Name) and node.func.id in stubs:
                    found.append(f"cell {number}: {node.func.id}(...)")
            for child in ast.iter_child_nodes(node):
                calls(child)

        calls(tree)
    return found


def test_stubbed_calls_are_found():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("def f(x):\n    raise NotImplementedError('Exercise f')", metadata={"tags": ["exercise"]}),
        nbformat.v4.new_code_cell("check('f', f)\ncheck('f', lambda x: f(x))\ndef g():\n    return f(1)"),
        nbformat.v4.new_code_cell("%time f(0)\ny = [f(i) for i in range(3)]\nprint(f(2))"),
        nbformat.v4.new_code_cell("if result.passed:\n    f(1)\ntry:\n    f(2)\nexcept NotImplementedError:\n    pass"),
        nbformat.v4.new_code_cell("ok = check('f', f)\nif ok:\n    f(3)")])
    assert stubbed_calls(nb) == ["cell 2: f(...)", "cell 2: f(...)"]


@pytest.mark.parametrize("notebook", sorted(p.name for p in (NOTEBOOK_ROOT / "practise").glob("*.ipynb")))
def test_a_practise_copy_calls_its_stubs_only_through_check(notebook):
    """Run all goes to the end of a practise copy: only check() calls an exercise the reader has not written."""
    found = stubbed_calls(nbformat.read(NOTEBOOK_ROOT / "practise" / notebook, as_version=4))
    assert not found, (f"practise/{notebook}: these cells call an unwritten exercise, so 'Run all' stops there "
                       f"(call it only inside check(), or compute the chapter's own result with llmlab): {found}")


def test_a_tied_head_loads_without_torch_2_5s_public_pre_hook(monkeypatch):
    """torch < 2.5 (the floors stack runs 2.1) has only the private _register_load_state_dict_pre_hook."""
    import torch

    from llmlab.config import ModelConfig
    from llmlab.model import Transformer

    config = ModelConfig(**{**ModelConfig.preset("tiny-llama").to_dict(), "tie_embeddings": True})
    trained = Transformer(config)
    state = trained.state_dict()
    assert "lm_head.weight" not in state                    # the tied matrix is saved once
    monkeypatch.delattr(torch.nn.Module, "register_load_state_dict_pre_hook")
    model = Transformer(config)
    model.load_state_dict(state)                            # strict: lm_head.weight is filled from tok_embed
    assert torch.equal(model.lm_head.weight, trained.tok_embed.weight)


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    """(python of the rehearsal environment, environment variables, the versions before llmlab)."""
    version = subprocess.run([PYTHON, "-c", "import sys; print(sys.version)"], capture_output=True, text=True,
                             check=True).stdout.strip()
    key = hashlib.sha256(json.dumps([stack(), version]).encode()).hexdigest()[:12]
    # Outside the checkout, like the converted models: a fresh clone on the same machine reuses the stack.
    base = Path(os.environ.get("LLMLAB_COLAB_STACK") or Path.home() / ".cache" / "llmlab-colab-stack")
    kind = ("floors-" if FLOORS else "") + ("" if PYTHON == sys.executable else f"py{version.split()[0]}-")
    home = base / f"{kind}{key}"
    # The converted models do not depend on the stack: the book's own cache (make models) is reused,
    # unless LLMLAB_COLAB_TIMING=1 asks for a fresh one, to time the conversions a new Colab session does.
    timing = os.environ.get("LLMLAB_COLAB_TIMING") == "1"
    cache = tmp_path_factory.mktemp("llmlab-cache") if timing else \
        Path(os.environ.get("LLMLAB_CACHE") or Path.home() / ".cache" / "llmlab")
    venv, py = home / "venv", home / "venv" / "bin" / "python"
    if FLOORS and not timing:   # its own conversions, so that another torch never rewrites the book's cache
        cache = home / "llmlab-cache"
    for old in base.glob("*/venv"):                     # older stacks of the same kind (Colab's, or the floors)
        if old.parent != home and old.parent.name[:-len(key)] == kind:
            shutil.rmtree(old.parent, ignore_errors=True)
    timings = {}

    def pip(*args):
        start = time.perf_counter()
        proc = subprocess.run([str(py), "-m", "pip", "install", "-q", *args], capture_output=True, text=True)
        assert proc.returncode == 0, f"pip install {' '.join(args)}\n{proc.stderr[-4000:]}"
        return time.perf_counter() - start

    if not (home / "ready").exists():
        shutil.rmtree(home, ignore_errors=True)
        subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True)
        pip("--upgrade", "pip")
        pip(*stack())
        (home / "ready").write_text("\n".join(stack()) + "\n")
    subprocess.run([str(py), "-m", "pip", "uninstall", "-y", "-q", "llmlab"], capture_output=True)
    # The installed version of each requirement (None: not installed).
    versions = ("import json, importlib.metadata as m\n"
                "def version(name):\n    try:\n        return m.version(name)\n    except m.PackageNotFoundError:\n        return None\n"
                f"print(json.dumps({{n: version(n) for n in {sorted(r.split('==')[0] for r in floors())!r}}}))")
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
    replaced = {name: (version, after[name]) for name, version in before.items() if version and after[name] != version}
    assert not replaced, f"installing llmlab replaced preinstalled packages (before, after): {replaced}"
    if FLOORS:      # every floor is what pip kept: the ranges' lower bounds install together with llmlab
        assert all(after[name] for name in after), f"not installed: {[n for n, v in after.items() if not v]}"
    site = subprocess.run([str(py), "-c", "import llmlab; print(llmlab.__file__)"], capture_output=True, text=True,
                          env=env, cwd="/").stdout
    assert str(py.parents[1]) in site, f"llmlab must come from the installed copy, not {site}"


RUNNER = """
import sys, time, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
start = time.perf_counter()
try:
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
finally:                                  # a failed run is kept too: its outputs say what was reached
    nbformat.write(nb, sys.argv[1])
    print(f"executed in {time.perf_counter() - start:.1f} s")
"""


def report(**line):
    """One line per notebook run, to $LLMLAB_COLAB_REPORT (a JSON-lines file), if it is set."""
    if os.environ.get("LLMLAB_COLAB_REPORT"):
        with open(os.environ["LLMLAB_COLAB_REPORT"], "a") as out:
            out.write(json.dumps(line) + "\n")


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_notebook_runs_alone_on_the_colab_stack(colab, notebook, tmp_path):
    py, env, before, _ = colab
    source = NOTEBOOK_ROOT / notebook
    images = markdown_images(nbformat.read(source, as_version=4))
    (tmp_path / source.name).write_bytes(source.read_bytes())        # alone in an empty folder
    start = time.perf_counter()
    proc = subprocess.run([str(py), "-c", RUNNER, source.name], capture_output=True, text=True, cwd=tmp_path, env=env)
    seconds = time.perf_counter() - start
    executed = nbformat.read(tmp_path / source.name, as_version=4)
    texts, stderr, lost_figures = [], [], 0
    for cell in executed.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})      # a figure shown as its repr only: the plot never appeared
            lost_figures += "<Figure size" in str(data.get("text/plain", "")) and "image/png" not in data
            text = output.get("text", "") or "".join(str(v) for v in output.get("data", {}).values())
            texts.append(text)
            if output.get("name") == "stderr":
                stderr += [line for line in output["text"].splitlines() if line.strip()]
    findfont = sum(t.count("findfont") for t in texts)
    uncarried = [ref for ref, carried in images if not carried]

    # What a reader sees: the executed notebook as Jupyter renders it (nbconvert), opened offline in
    # Chromium; every image of the page (diagrams, plots) must have loaded.
    html = subprocess.run([str(py), "-m", "nbconvert", "--to", "html", source.name], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    shown = total = None
    if html.returncode == 0:
        from browser import open_in_browser

        page = open_in_browser(tmp_path / f"{source.stem}.html", js=COUNT_IMAGES, width=1000, height=1500, wait_ms=3000)
        shown, total = (int(re.search(f'data-{k}="(\\d+)"', page.dom).group(1)) for k in ("shown", "images"))
    error = "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or [""])[-1][:300]
    report(notebook=notebook, stack=before, passed=proc.returncode == 0 and not findfont and not uncarried
           and len(stderr) <= MAX_STDERR_LINES and shown == total and total >= len(images) and not lost_figures,
           lost_figures=lost_figures,
           seconds=round(seconds, 1), executed=proc.stdout.strip(), error=error, stderr_lines=len(stderr),
           stderr=stderr[:8], findfont=findfont, images=total, broken_images=None if total is None else total - shown,
           uncarried_images=uncarried, revision=subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                                               capture_output=True, text=True).stdout.strip())

    assert not uncarried, f"{notebook}: images that a lone notebook cannot show: {uncarried}"
    assert proc.returncode == 0, f"{notebook} failed on {before}:\n{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"
    print(f"{notebook} on {before}: {proc.stdout.strip()}")
    assert not findfont, f"{notebook}: {findfont} findfont lines in the outputs"
    assert not lost_figures, f"{notebook}: {lost_figures} figures were shown as '<Figure size ...>' text, not as plots"
    assert len(stderr) <= MAX_STDERR_LINES, f"{notebook}: {len(stderr)} lines on stderr:\n" + "\n".join(stderr[:40])
    assert html.returncode == 0, html.stderr[-2000:]
    assert total >= len(images) and shown == total, f"{notebook}: {total - shown} of {total} images are broken"


COUNT_IMAGES = """setTimeout(function () {
  var images = document.querySelectorAll('img'), shown = 0;
  images.forEach(function (i) { if (i.complete && i.naturalWidth > 0) shown++; });
  document.body.dataset.images = images.length;
  document.body.dataset.shown = shown;
}, 1500);"""
