"""The book's site: two Colab entries per chapter, a lighter site, and the build's environment.

- Launch menu: "Colab: read" opens the chapter with its solutions, "Colab: practise" opens
  practise/<chapter>.ipynb (the student copy written by scripts/make_practise.py). The theme builds
  the menu at priority 501; this handler runs after it.
- A lighter site: the theme ships Font Awesome twice (a 1.5 MB script that swaps icons for SVG, and
  the same icons as CSS with web fonts). The pages keep the CSS and drop the script. Source maps
  and legacy font formats are not copied into the site. (Formulas are MathML: _ext/llmlab_math.py.)
- ``{llmlab-environment}``: a table of what this build ran on (versions, CPU, GPU, model files with
  their sha256), written by the build itself into the build report.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

FONTAWESOME_SCRIPT = re.compile(r'<script[^>]*src="[^"]*_static/scripts/fontawesome\.js[^"]*"[^>]*></script>\s*'
                                r'|<link[^>]*href="[^"]*_static/scripts/fontawesome\.js[^"]*"[^>]*>\s*')


def add_practise_link(app, pagename, templatename, context, doctree):
    drop_colab_for_text_pages(context)
    if not pagename.startswith("chapters/"):
        return
    name = pagename.split("/", 1)[1] + ".ipynb"
    practise = Path(app.srcdir) / "practise" / name
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        buttons = group["buttons"]
        for i, button in enumerate(list(buttons)):
            if button.get("text") != "Colab":
                continue
            button["text"] = "Colab: read"
            button["tooltip"] = "Open the whole chapter, solutions included, in Colab"
            if practise.exists():
                buttons.insert(i + 1, dict(button, text="Colab: practise",
                                           tooltip="Open the practise copy (solutions removed) in Colab",
                                           url=button["url"].replace(f"/chapters/{name}", f"/practise/{name}")))
            break


def drop_colab_for_text_pages(context):
    """A MyST page (.md with code cells, e.g. the instructor guide) gets a Colab button from the theme,
    but Colab opens notebooks only (its link to a .md fails): such pages lose the button (and the
    launch menu when nothing is left in it)."""
    groups = context.get("header_buttons", [])
    for group in list(groups):
        if group.get("label") != "launch-buttons":
            continue
        group["buttons"] = [b for b in group["buttons"]
                            if not (b.get("text", "").startswith("Colab") and not b.get("url", "").endswith(".ipynb"))]
        if not group["buttons"]:
            groups.remove(group)


def lighten_site(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        lighter = FONTAWESOME_SCRIPT.sub("", text)
        if lighter != text:
            page.write_text(lighter, encoding="utf-8")
    static = out / "_static"
    for path in [static / "scripts" / "fontawesome.js", *static.rglob("*.map"), *static.rglob("*.LICENSE.txt")]:
        path.unlink(missing_ok=True)
    vendored = Path(app.srcdir) / "assets" / "vendor"
    for folder in (static / "vendor").glob("*"):     # left over from an earlier build's vendored files
        if folder.is_dir() and folder.name != "fontawesome" and not (vendored / folder.name).exists():
            shutil.rmtree(folder)
    # Browsers take the first format they support in an @font-face list: woff2 (then woff) everywhere
    # today; .eot, .ttf and .svg copies are for browsers older than the rest of the page supports.
    for path in (static / "vendor" / "fontawesome" / "webfonts").glob("*"):
        if path.suffix in {".eot", ".svg", ".ttf"}:
            path.unlink()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cpu_kernels(torch) -> str:
    """The instruction set torch's own CPU kernels use, and any variable that chose it."""
    chosen = [f"{name}={os.environ[name]}" for name in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")
              if os.environ.get(name)]
    return (f"{torch.backends.cpu.get_cpu_capability()} (torch.backends.cpu.get_cpu_capability()"
            + (f"; set by {', '.join(chosen)}" if chosen else "; the CPU's best") + ")")


def blas_library(torch) -> str:
    """The matrix-multiply library torch was built with (MKL's version when it is MKL)."""
    config = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([\d.]+)", config)
    if mkl:
        return f"Intel MKL {mkl.group(1)} (it picks its kernels by CPU vendor and instruction set)"
    match = re.search(r"BLAS_INFO=(\w+)", config)
    return match.group(1) if match else "not reported"


def execution_plan() -> str:
    """How scripts/execute_book.py ran the notebooks (it writes _build/execution.json), or that it did not."""
    record = Path(__file__).resolve().parent.parent / "_build" / "execution.json"
    try:
        plan = json.loads(record.read_text())
    except (OSError, ValueError):
        return "by jupyter-book itself, one at a time"
    kept = ("; pages whose code had not changed since an earlier run were taken from it" if plan.get("kept")
            else "")
    return (f"{plan['jobs']} at a time with {plan['threads_shared']} torch thread(s) each; the pages that time "
            f"themselves alone with {plan['threads_alone']} ({plan['seconds']:.0f} s in all{kept})")


def environment_rows() -> list[tuple[str, str]]:
    """(what, value) rows describing the machine and software this build ran on."""
    from importlib.metadata import PackageNotFoundError, version

    rows = [("Python", platform.python_version()), ("system", platform.platform())]
    cpu = platform.processor() or platform.machine()
    try:
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    rows.append(("CPU", f"{cpu}, {os.cpu_count()} logical cores"))
    for package in ["torch", "transformers", "tokenizers", "numpy", "gguf", "jupyter-book", "myst-nb", "llmlab"]:
        try:
            rows.append((package, version(package)))
        except PackageNotFoundError:
            rows.append((package, "not installed"))
    try:
        import torch

        # the build's own process; the pages ran with the threads that "pages executed" gives
        rows.append(("torch threads of the build process", f"{torch.get_num_threads()} (OMP_WAIT_POLICY="
                                      f"{os.environ.get('OMP_WAIT_POLICY', 'unset')}); for the pages, see below"))
        rows.append(("CPU kernels", cpu_kernels(torch)))
        rows.append(("BLAS", blas_library(torch)))
        rows.append(("pages executed", execution_plan()))
        rows.append(("GPU", torch.cuda.get_device_name(0) if torch.cuda.is_available() else
                     "none: every chapter ran on the CPU"))
    except ImportError:
        pass
    try:
        from llmlab.registry import OFFLINE_MODELS, offline_gguf_path

        for model in OFFLINE_MODELS.values():
            try:
                path = offline_gguf_path(model)
                rows.append((f"model file {model.name}", f"{path.name}, {path.stat().st_size / 2**20:.1f} MiB, "
                                                          f"sha256 {_sha256(path)}"))
            except Exception as error:  # a missing package is worth a row, not a failed build
                rows.append((f"model file {model.name}", f"not available ({type(error).__name__})"))
    except ImportError:
        rows.append(("model files", "llmlab.registry not importable"))
    return rows


class EnvironmentTable(SphinxDirective):
    """``{llmlab-environment}``: the build's environment as a two-column table."""

    def run(self):
        table = nodes.table(classes=["llmlab-environment"])
        group = nodes.tgroup(cols=2)
        table += group
        group += nodes.colspec(colwidth=25)
        group += nodes.colspec(colwidth=75)
        body = nodes.tbody()
        for what, value in environment_rows():
            row = nodes.row()
            for text in (what, value):
                entry = nodes.entry()
                entry += nodes.paragraph(text=text)
                row += entry
            body += row
        group += body
        return [table]


def setup(app):
    app.connect("html-page-context", add_practise_link, priority=502)
    app.connect("build-finished", lighten_site)
    app.add_directive("llmlab-environment", EnvironmentTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
