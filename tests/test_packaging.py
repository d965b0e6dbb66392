"""llmlab installs from a git URL as a complete package: what Colab's setup cell does, offline.

The wheel is built from the committed tree (``git+file://``), installed into a folder of its own
and imported from outside the repository, so that a module or data file missing from the package
(the views' JavaScript, say) fails here instead of in a learner's Colab session.
"""
import json
import re
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout of the repository")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), f"llmlab @ git+file://{ROOT}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [built] = out.glob("llmlab-*.whl")
    return built


def test_wheel_holds_every_module_and_asset_and_only_ranges(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "llmlab"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    missing = [path for path in tracked if path not in names]
    assert not missing, f"committed files missing from the wheel: {missing}"
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [line for line in zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert any("torch" in line for line in requires)
    assert not [line for line in requires if "==" in line], f"pinned dependencies would replace Colab's: {requires}"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "llmlab = llmlab.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_package_works_outside_the_repository(wheel, tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
                           str(wheel)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    script = """
import json, llmlab, torch
from llmlab.visualization import SimilarityView
from llmlab.exercises import EXERCISES
html = SimilarityView(torch.eye(2), ["a", "b"], ["a", "b"]).to_html()   # reads its .js and .css files
model = llmlab.Transformer(llmlab.ModelConfig.preset("tiny-llama"))
print(json.dumps({"file": llmlab.__file__, "view_js": "window.llmlab.views" in html and ".llmlab-view" in html, "exercises": len(EXERCISES),
                  "logits": list(model(torch.tensor([[1, 2, 3]])).shape)}))
"""
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["file"].startswith(str(site)), f"imported {report['file']}, not the installed copy"
    assert report["view_js"] and report["exercises"] >= 27
    assert report["logits"][:2] == [1, 3]


def test_installed_package_reports_its_version_and_repository(wheel, tmp_path):
    """`llmlab --version`, and the install hints name the repository of pyproject.toml's [project.urls]."""
    import tomllib

    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(site)}
    version = subprocess.run([sys.executable, "-m", "llmlab.cli", "--version"], cwd=tmp_path, env=env,
                             capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip() == "llmlab 0.1.0", version.stdout + version.stderr
    hint = subprocess.run([sys.executable, "-c", "from llmlab.notebook import install_command; "
                           "print(install_command('instructor'))"], cwd=tmp_path, env=env, capture_output=True, text=True)
    url = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    assert hint.stdout.strip() == f'pip install "llmlab[instructor] @ git+{url}"', hint.stdout + hint.stderr


OMP_PROBE = "import os, sys; PRE; import llmlab; print(os.environ.get('OMP_WAIT_POLICY'))"


@pytest.mark.parametrize("before, preset, expected", [
    ("", None, "PASSIVE"),                 # llmlab first, nothing set: the safe default
    ("", "ACTIVE", "ACTIVE"),              # the user's own value stays
    ("import torch", None, "None"),        # torch already loaded: too late to matter, so left alone
])
def test_import_sets_omp_wait_policy_only_when_it_can_matter(before, preset, expected, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if preset:
        env["OMP_WAIT_POLICY"] = preset
    proc = subprocess.run([sys.executable, "-c", OMP_PROBE.replace("PRE", before or "pass")], env=env,
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == expected


def test_release_files_build_and_pass_twine_check(tmp_path):
    """What `make dist` does (README.md, "Releasing llmlab"): sdist + wheel, then twine check --strict."""
    out = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    assert "deprecated" not in (build.stdout + build.stderr).lower(), "the build warns about a deprecated setting"
    files = sorted(p.name for p in out.iterdir())
    assert files == ["llmlab-0.1.0-py3-none-any.whl", "llmlab-0.1.0.tar.gz"], files
    check = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, out.iterdir())],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def documented_pip_commands() -> list[tuple[str, str]]:
    """(file, command) for every `pip install` in README.md and the instructor guide, as written."""
    found = []
    for name in ("README.md", "chapters/appendix_instructor.md"):
        text = (ROOT / name).read_text()
        blocks = re.findall(r"```(?:bash|sh|shell)?\n(.*?)```", text, re.S)
        lines = [line.split(" #")[0].strip() for block in blocks for line in block.splitlines()]
        inline = re.findall(r"`(pip install [^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        found += [(name, command) for command in lines + inline if command.startswith("pip install")]
    return found


def test_readme_documents_the_cpu_build_first():
    commands = [command for name, command in documented_pip_commands() if name == "README.md"]
    assert commands and commands[0] == CPU_TORCH, commands


@pytest.mark.parametrize("name, command", documented_pip_commands())
def test_documented_install_command_resolves(name, command, tmp_path):
    """Each install command of the README and the instructor guide, resolved by pip as written (--dry-run).

    The repository address becomes this clone (git+file://, the committed tree); a command that installs
    "." runs in the repository. The CPU index of PyTorch cannot be reached from the test machine: that
    one command is only checked for its exact form (test_readme_documents_the_cpu_build_first).
    """
    import shlex
    import tomllib

    if command == CPU_TORCH:
        pytest.skip("download.pytorch.org is not reachable from the test machine")
    url = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    assert "llmlab" not in command or "git+" in command or " ." in command or '".[' in command, \
        f"{name}: `{command}` installs llmlab from PyPI, where it is not published"
    args = [a.replace(f"git+{url}", f"git+file://{ROOT}") for a in shlex.split(command)[2:]]
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "-q", *args], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"{name}: `{command}` fails:\n{proc.stderr[-3000:]}"
    assert "does not provide the extra" not in proc.stderr, proc.stderr
