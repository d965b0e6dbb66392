"""A new Colab user's path, rehearsed offline: a fresh virtual environment, llmlab installed exactly
as every chapter's setup cell installs it (the GitHub URL replaced by git+file:// of this repository),
the `[reference]` extra with the LOWEST transformers release that pyproject.toml's range allows, the
two model packages, and then chapters 1, 10 and 15 executed top to bottom in that environment, from a
folder outside the repository (so `import llmlab` finds the installed copy, not the source tree).

Colab ships its own torch. Here the only CPU build on disk is the pinned one; set
LLMLAB_COLAB_TORCH to another requirement (for example "torch==2.14.1") to rehearse with a different
torch where one can be installed. The test prints which torch and transformers it ran.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ["01_a_model_is_a_function", "10_kv_cache", "15_logit_lens"]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout of the repository")]


def lowest_allowed(requirement: str) -> str:
    """'transformers>=4.50' -> 'transformers==4.50'; the lower bound of a range, pinned."""
    match = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)(,.*)?", requirement.strip())
    assert match, f"{requirement!r} has no >= lower bound to rehearse"
    return f"{match.group(1)}=={match.group(2)}"


def setup_cell_commands(notebook: Path) -> list[str]:
    """The %pip lines of a chapter's setup cell, as argument strings."""
    source = nbformat.read(notebook, as_version=4).cells[0].source
    return [line.strip().removeprefix("%pip install").strip() for line in source.splitlines()
            if line.strip().startswith("%pip install")]


def test_lowest_allowed_reads_the_range():
    assert lowest_allowed("transformers>=4.50") == "transformers==4.50"
    with pytest.raises(AssertionError):
        lowest_allowed("transformers")


def test_chapters_run_in_a_fresh_colab_style_environment(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")

    def pip(*args):
        proc = subprocess.run([py, "-m", "pip", "install", "-q", *args], capture_output=True, text=True)
        assert proc.returncode == 0, f"pip install {' '.join(args)}\n{proc.stderr[-4000:]}"

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [transformers_range] = [r for r in pyproject["project"]["optional-dependencies"]["reference"]
                            if r.startswith("transformers")]
    pinned_torch = next(line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
                        if line.strip().startswith("torch"))
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(lowest_allowed(transformers_range) + "\n")

    pip("--upgrade", "pip")                        # Colab's pip is recent; a venv's may not be
    # Colab's preinstalled tools: torch (ours, or the one asked for), Jupyter's kernel machinery.
    pip(os.environ.get("LLMLAB_COLAB_TORCH", pinned_torch), "ipykernel", "nbclient", "nbformat")
    commands = setup_cell_commands(ROOT / "chapters" / f"{CHAPTERS[0]}.ipynb")
    assert len(commands) >= 3 and any("llmlab[reference]" in c for c in commands), commands
    for command in commands:
        command = re.sub(r"git\+https://github\.com/[^\s\"']+", f"git+file://{ROOT}", command)
        pip("-c", str(constraints), *[a for a in shlex.split(command) if a != "-q"])

    versions = subprocess.run([py, "-c", "import torch, transformers, llmlab; print(json.dumps("
                               "[torch.__version__, transformers.__version__, llmlab.__file__]))".replace(
                                   "import torch", "import json, torch")],
                              capture_output=True, text=True, cwd=tmp_path)
    assert versions.returncode == 0, versions.stderr[-3000:]
    torch_version, transformers_version, llmlab_file = json.loads(versions.stdout)
    print(f"Colab rehearsal: torch {torch_version}, transformers {transformers_version}, llmlab from {llmlab_file}")
    assert str(venv) in llmlab_file, "llmlab must be the installed copy, not the source tree"
    assert transformers_version == lowest_allowed(transformers_range).split("==")[1] or \
        transformers_version.startswith(lowest_allowed(transformers_range).split("==")[1] + ".")

    work = tmp_path / "work"
    work.mkdir()
    runner = """
import sys, time, nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
start = time.perf_counter()
NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
print(f"{path}: executed in {time.perf_counter() - start:.1f} s")
"""
    for name in CHAPTERS:
        shutil.copy(ROOT / "chapters" / f"{name}.ipynb", work)
        proc = subprocess.run([py, "-c", runner, f"{name}.ipynb"], capture_output=True, text=True, cwd=work,
                              env={**os.environ, "PYTHONPATH": "", "MPLBACKEND": "Agg"})
        assert proc.returncode == 0, f"{name} failed in the Colab-style environment:\n{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}"
        print(proc.stdout.strip())
