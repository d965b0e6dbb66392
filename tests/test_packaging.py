"""llmlab installs from a git URL as a complete package: what Colab's setup cell does, offline.

The wheel is built from the committed tree (``git+file://``), installed into a folder of its own
and imported from outside the repository, so that a module or data file missing from the package
(the views' JavaScript, say) fails here instead of in a learner's Colab session.
"""
import json
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
