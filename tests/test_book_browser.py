"""Open built pages of the book in headless Chromium with the network closed and look at them."""
import os
import re
from pathlib import Path

import pytest

from browser import open_in_browser, read_png

HTML = Path(__file__).resolve().parents[1] / "_build" / "html"

# How many MathML formulas the browser drew with a size (the formulas are written at build time).
DRAWN_MATH = ("Array.prototype.filter.call(document.querySelectorAll('math'), function (m) {"
              " var r = m.getBoundingClientRect(); return r.width > 0 && r.height > 0; }).length")

# After the page's scripts ran: switch the mask view to its second mask (the sliding window), point
# at the last query's cell and read the readout back. The view's script runs in the page, with no
# kernel behind it.
USE_THE_MASK_VIEW = """
setTimeout(function () {
  var out = document.body.dataset;
  out.math = DRAWN_MATH;
  out.mathAll = document.querySelectorAll('math').length;
  var select = document.querySelector('.llmlab-view select');
  if (!select) { out.error = 'no mask view rendered'; return; }
  select.value = select.options[1].value;
  select.dispatchEvent(new Event('change', {bubbles: true}));
  var cell = document.querySelector('.llmlab-view td.llmlab-cell[data-i="7"][data-j="7"]');
  cell.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));
  out.readout = document.querySelector('.llmlab-view .llmlab-readout').textContent;
}, 3000);
""".replace("DRAWN_MATH", DRAWN_MATH)


def page(name):
    path = HTML / name
    if not path.exists():
        pytest.fail(f"{path} is missing: build the book first with `make book` (make test does it)")
    return path


def test_setup_page_typesets_math_and_runs_its_view(tmp_path):
    shot = tmp_path / "setup.png"
    result = open_in_browser(page("chapters/00_setup.html"), js=USE_THE_MASK_VIEW, screenshot=shot,
                             width=1200, height=2400, wait_ms=6000)
    assert not result.errors, result.errors
    assert 'data-error=' not in result.dom, result.dom[result.dom.find("data-error"):][:200]
    drawn, total = (int(re.search(f'data-{key}="(\\d+)"', result.dom).group(1)) for key in ("math", "math-all"))
    assert drawn == total > 0, f"{drawn} of {total} MathML formulas have a size on the page"
    assert "sliding window of 3" in result.dom and "t7 may attend to t5..t7 (3 positions)" in result.dom, \
        "the mask view did not answer for the sliding window"
    pixels = read_png(shot)
    assert pixels.std() > 0.05, "the screenshot is blank"

def test_front_page_typesets_math(tmp_path):
    result = open_in_browser(page("intro.html"), js="setTimeout(function () {"
                             "document.body.dataset.math = " + DRAWN_MATH + ";}, 1000);",
                             screenshot=tmp_path / "intro.png", wait_ms=6000)
    assert not result.errors, result.errors
    assert "data-math=" in result.dom and 'data-math="0"' not in result.dom


def toc_pages():
    import yaml

    toc = yaml.safe_load((HTML.parents[1] / "_toc.yml").read_text())
    return [chapter["file"] for part in toc["parts"] for chapter in part["chapters"]]


# Runs in the page after load: counts what rendered and what failed, and writes it into the DOM.
INSPECT_PAGE = """
setTimeout(function () {
  var out = document.body.dataset;
  var views = document.querySelectorAll('.llmlab-view');
  out.views = views.length;
  out.viewsDrawn = document.querySelectorAll('.llmlab-view[data-rendered="yes"]').length;
  out.widgets = document.querySelectorAll('.jupyter-widgets.widget-container, .jupyter-widgets.widget-inline-hbox, .jupyter-widgets.widget-slider').length;
  out.math = DRAWN_MATH;
  out.mathAll = document.querySelectorAll('math').length;
  var prose = document.querySelector('article').cloneNode(true);   // the text outside code cells
  prose.querySelectorAll('pre, code, script, style, .cell_input').forEach(function (n) { n.remove(); });
  out.rawMath = (prose.textContent.match(/\\$\\$|\\\\frac|\\\\sqrt/g) || []).length;
  var broken = [];
  document.querySelectorAll('article img').forEach(function (img) {
    if (!img.complete || img.naturalWidth === 0) broken.push(img.getAttribute('src'));
  });
  out.brokenImages = broken.join(' ');
  out.images = document.querySelectorAll('article img').length;
}, 4000);
""".replace("DRAWN_MATH", DRAWN_MATH)


def dataset(dom, key):
    import re

    match = re.search(rf'<body[^>]*\sdata-{key}="([^"]*)"', dom)
    assert match, f"the page did not report data-{key}"
    return match.group(1)


@pytest.mark.parametrize("name", toc_pages())
def test_every_page_renders_in_the_browser(name, tmp_path):
    """Each built page: no script errors, no failed loads, math typeset, figures and views drawn."""
    shots = Path(os.environ.get("LLMLAB_SCREENSHOTS", tmp_path))
    shot = shots / (Path(name).name + ".png")
    result = open_in_browser(page(f"{name}.html"), js=INSPECT_PAGE, screenshot=shot, width=1200, height=1800,
                             wait_ms=8000)
    assert not result.errors, result.errors
    assert dataset(result.dom, "broken-images") == "", "images that did not load: " + dataset(result.dom, "broken-images")
    assert dataset(result.dom, "raw-math") == "0", "math left untypeset on the page"
    drawn_math, all_math = int(dataset(result.dom, "math")), int(dataset(result.dom, "math-all"))
    assert drawn_math > 0 or all_math == 0, f"none of the {all_math} formulas has a size on the page"
    views, drawn = int(dataset(result.dom, "views")), int(dataset(result.dom, "views-drawn"))
    assert drawn == views, f"only {drawn} of {views} interactive views were drawn by their script"
    stem = Path(name).name
    if stem[:2].isdigit() and stem[:2] != "00" and not stem.endswith("_lab"):
        # a chapter is its lesson and its lab: the view may sit in either (a lab's views are drawn by its own test)
        widgets = int(dataset(result.dom, "widgets"))
        lab = HTML / f"{name}_lab.html"
        in_lab = lab.exists() and 'class="llmlab-view' in lab.read_text(encoding="utf-8")
        assert views + widgets > 0 or in_lab, "every chapter needs an interactive view that works in the static page"
    assert read_png(shot).std() > 0.05, "the screenshot is blank"


def test_wide_screens_get_a_wider_article_for_the_code(tmp_path):
    measure = ("setTimeout(function () { var a = document.querySelector('.bd-article-container');"
               "document.body.dataset.articleWidth = Math.round(a.getBoundingClientRect().width); }, 500);")
    widths = {}
    for window in (1300, 1800):
        result = open_in_browser(page("chapters/10_kv_cache.html"), js=measure, width=window, height=900)
        assert not result.errors, result.errors
        widths[window] = int(result.dom.split('data-article-width="')[1].split('"')[0])
    # 1800 px: the page grows to 100rem (assets/llmlab-book.css) instead of the theme's 88rem
    assert widths[1800] >= 1000 and widths[1800] > widths[1300] + 150, widths


# A phone: pages that once overflowed (a long inline literal in chapter 14, the glossary's table),
# and pages full of views. The page may scroll inside a code block or a view's table, never sideways.
PHONE_PAGES = ["chapters/14_contextual_representations", "chapters/appendix_glossary",
               "chapters/09_lm_head_and_sampling", "chapters/08_the_whole_stack", "chapters/05_self_attention"]

MEASURE_OVERFLOW = """
setTimeout(function () {
  var out = document.body.dataset, wide = [];
  out.pageWidth = document.documentElement.scrollWidth;
  document.querySelectorAll('article *').forEach(function (n) {
    if (wide.length < 3 && n.getBoundingClientRect().right > window.innerWidth + 1 &&
        !n.parentNode.closest('.llmlab-scroll, pre, .highlight, .table-wrapper, mjx-container, .output_area, .cell_output')) {
      wide.push(n.tagName + '.' + n.className + ': ' + (n.textContent || '').slice(0, 40));
    }
  });
  out.wide = wide.join(' | ');
}, 3000);
"""


@pytest.mark.parametrize("name", PHONE_PAGES)
def test_pages_fit_a_phone(name, tmp_path):
    result = open_in_browser(page(f"{name}.html"), js=MEASURE_OVERFLOW, width=420, height=900, wait_ms=6000,
                             screenshot=tmp_path / (Path(name).name + "-420.png"))
    assert not result.errors, result.errors
    width = int(dataset(result.dom, "page-width"))
    assert width <= 420, f"the page is {width} px wide at 420 px: {dataset(result.dom, 'wide')}"


def test_glossary_terms_have_anchors_and_are_linked_from_their_chapters():
    import re
    import sys

    sys.path.insert(0, str(HTML.parents[1] / "scripts"))
    import make_glossary

    glossary = page("chapters/appendix_glossary.html").read_text()
    anchors = set(re.findall(r'<dt id="(term-[^"]+)"', glossary))
    terms = make_glossary.load_terms()
    assert len(anchors) == len(terms), "every glossary term needs its own anchor"
    assert "such as &lt;bos&gt;, &lt;eos&gt;, padding" in re.sub(r"<[^>]+>", "", glossary)
    linked = 0
    for (chapter, kind), pairs in make_glossary.chapter_terms().items():     # kind: the lesson or the lab
        files = [p for p in (HTML / "chapters").glob(f"{chapter:02d}_*.html" if isinstance(chapter, int) else f"{chapter:0>3}_*.html")
                 if p.stem.endswith("_lab") == (kind == "lab")]
        if not files:
            continue
        links = set(re.findall(r'href="appendix_glossary.html#(term-[^"]+)"', files[0].read_text()))
        assert links <= anchors
        assert links, f"the {kind} of chapter {chapter} links none of the terms it teaches"
        linked += len(links)
    assert linked >= len(terms) // 2


def test_chapter_12_attention_table_fits_a_wide_screen(tmp_path):
    js = """setTimeout(function () {
      var box = document.querySelector('.llmlab-attention .llmlab-scroll');
      document.body.dataset.fits = box ? (box.scrollWidth <= box.clientWidth) : 'no view';
    }, 3000);"""
    result = open_in_browser(page("chapters/12_training_lab.html"), js=js, width=1800, height=1200, wait_ms=6000,
                             screenshot=tmp_path / "12-1800.png")
    assert not result.errors, result.errors
    assert dataset(result.dom, "fits") == "true", "the attention table scrolls sideways at 1800 px"


# Navigation on a phone and on a laptop, tested on a tiny book (two short pages) built with the book's
# own _config.yml, extensions and assets: the chapter list (the ☰ button) and the "Contents" button
# at 420 px, and the button that collapses the chapter list at 1280 px.
TINY_PAGE = {
    "cells": [
        {"cell_type": "markdown", "id": "title", "metadata": {},
         "source": "# Page {name}\n\n## First section\n\nSome text.\n\n{diagram}\n\n## Second section\n\nMore text.\n"},
        {"cell_type": "code", "id": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": "print('hello')"},
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}


@pytest.fixture(scope="module")
def tiny_book(tmp_path_factory):
    import json
    import subprocess
    import sys

    import yaml

    root = HTML.parents[1]
    book = tmp_path_factory.mktemp("tiny_book")
    config = yaml.safe_load((root / "_config.yml").read_text())
    config["execute"] = {"execute_notebooks": "off"}
    config["exclude_patterns"] = ["_build/*"]
    config["sphinx"]["local_extensions"] = {name: str(root / path)
                                             for name, path in config["sphinx"]["local_extensions"].items()}
    config["sphinx"]["config"]["html_static_path"] = [str(root / p) for p in config["sphinx"]["config"]["html_static_path"]]
    (book / "_config.yml").write_text(yaml.safe_dump(config))
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nparts:\n  - caption: Chapters\n    chapters:\n"
                                   "      - file: chapters/one\n      - file: chapters/two\n")
    (book / "intro.md").write_text("# A tiny book\n\nTwo pages.\n")
    (book / "chapters").mkdir()
    # a diagram the way scripts/sync_notebooks.py writes it into a notebook: inline PNG data, named in the title
    import base64
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 1))
    ax.plot([0, 1], [0, 1])
    png = io.BytesIO()
    fig.savefig(png, format="png")
    plt.close(fig)
    diagram = f'![A tiny diagram](data:image/png;base64,{base64.b64encode(png.getvalue()).decode()} "tiny.svg")'
    for name in ("one", "two"):
        page = json.loads(json.dumps(TINY_PAGE))
        page["cells"][0]["source"] = page["cells"][0]["source"].format(name=name, diagram=diagram)
        (book / "chapters" / f"{name}.ipynb").write_text(json.dumps(page))
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    proc = subprocess.run([str(jupyter_book), "build", "-W", "--keep-going", str(book)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return book / "_build" / "html"


# Tap the visible button of `kind` (primary: the chapter list, secondary: the contents), then report
# whether its panel is open and which links it shows; then press Escape and report again.
TAP_TOGGLE = """
setTimeout(function () {
  var out = document.body.dataset;
  var shown = function (el) { var r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0 &&
                              getComputedStyle(el).visibility !== 'hidden'; };
  var buttons = Array.prototype.filter.call(document.querySelectorAll('button.KIND-toggle'), shown);
  out.buttons = buttons.length;
  if (!buttons.length) return;
  buttons[0].click();
  setTimeout(function () {
    var dialog = document.getElementById('pst-KIND-sidebar-modal');
    out.open = dialog.open;
    out.links = Array.prototype.filter.call(dialog.querySelectorAll('a'), shown)
                     .map(function (a) { return a.textContent.trim(); }).join('|');
    dialog.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}));
    setTimeout(function () { out.openAfterEscape = dialog.open; }, 200);
  }, 300);
}, 1000);
"""


@pytest.mark.parametrize("kind, expected", [("primary", ["Page one", "Page two"]),
                                            ("secondary", ["First section", "Second section"])])
def test_phone_navigation_buttons_open_their_panels(tiny_book, kind, expected, tmp_path):
    result = open_in_browser(tiny_book / "chapters" / "one.html", js=TAP_TOGGLE.replace("KIND", kind),
                             width=420, height=900, wait_ms=3000, screenshot=tmp_path / f"{kind}-420.png")
    assert not result.errors, result.errors
    assert dataset(result.dom, "buttons") == "1", f"expected one visible {kind} button at 420 px"
    assert dataset(result.dom, "open") == "true", f"tapping the {kind} button at 420 px opened nothing"
    links = dataset(result.dom, "links").split("|")
    assert all(name in links for name in expected), links
    assert dataset(result.dom, "open-after-escape") == "false"


COLLAPSE = """
var still = document.createElement('style');     // the end state at once: no 0.25 s transition
still.textContent = '* { transition: none !important; }';
document.head.appendChild(still);
setTimeout(function () {
  var out = document.body.dataset, sidebar = document.getElementById('pst-primary-sidebar');
  var state = function () { return getComputedStyle(sidebar).visibility; };
  var buttons = Array.prototype.filter.call(document.querySelectorAll('button.primary-toggle'),
                                            function (b) { return b.getBoundingClientRect().width > 0; });
  out.buttons = buttons.length;
  out.before = state();
  buttons[0].click();
  setTimeout(function () {
    out.afterOne = state();
    out.dialog = document.getElementById('pst-primary-sidebar-modal').open;
    buttons[0].click();
    setTimeout(function () { out.afterTwo = state(); }, 600);
  }, 600);
}, 1000);
"""


def test_laptop_collapse_button_hides_and_shows_the_chapter_list(tiny_book, tmp_path):
    result = open_in_browser(tiny_book / "chapters" / "one.html", js=COLLAPSE, width=1280, height=800,
                             wait_ms=4000, screenshot=tmp_path / "collapse-1280.png")
    assert not result.errors, result.errors
    assert dataset(result.dom, "buttons") == "1"
    states = [dataset(result.dom, key) for key in ("before", "after-one", "after-two")]
    assert states == ["visible", "hidden", "visible"], states
    assert dataset(result.dom, "dialog") == "false", "at 1280 px the button collapses the list, no panel opens"


def test_a_diagram_carried_by_the_notebook_shows_in_the_book(tiny_book):
    js = """setTimeout(function () {
      var img = document.querySelector('article img[alt="A tiny diagram"]');
      document.body.dataset.diagram = img ? (img.complete && img.naturalWidth > 0) : 'missing';
    }, 500);"""
    result = open_in_browser(tiny_book / "chapters" / "one.html", js=js, width=1000, height=800)
    assert not result.errors, result.errors
    assert dataset(result.dom, "diagram") == "true"


# At phone width: tap the first diagram of the page, then report what the overlay shows. A diagram is
# drawn at 600-1,100 pt and shown at the text's width, so its labels are 3-6 px tall on a phone; the
# overlay shows it at its own drawn size, where tests/test_figures_phone.py holds every label at 9 px.
TAP_A_DIAGRAM = """
setTimeout(function () {
  var out = document.body.dataset;
  var links = Array.prototype.filter.call(document.querySelectorAll('a.llmlab-figure-link'),
                                          function (a) { return /\\.svg$/.test(a.href); });
  out.diagrams = links.length;
  if (!links.length) return;
  var small = links[0].querySelector('img');
  out.shownWidth = Math.round(small.getBoundingClientRect().width);
  links[0].dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true, button: 0}));
  setTimeout(function () {
    var zoom = document.querySelector('.llmlab-figure-zoom');
    out.zoom = zoom ? 'open' : 'none';
    if (!zoom) return;
    var big = zoom.querySelector('img');
    out.loaded = big.complete && big.naturalWidth > 0 ? 'yes' : 'no';
    out.naturalWidth = big.naturalWidth;
    out.bigWidth = Math.round(big.getBoundingClientRect().width);
    out.scrolls = zoom.scrollWidth > zoom.clientWidth ? 'yes' : 'no';
    document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}));
    setTimeout(function () { out.afterEscape = document.querySelector('.llmlab-figure-zoom') ? 'open' : 'closed'; }, 100);
  }, 800);
}, 1500);
"""


@pytest.mark.parametrize("name", ["chapters/05_self_attention.html", "zh/chapters/05_self_attention.html"])
def test_a_tapped_diagram_opens_at_its_drawn_size_on_a_phone(name, tmp_path):
    result = open_in_browser(page(name), js=TAP_A_DIAGRAM, width=420, height=900, wait_ms=4000)
    assert not result.errors, result.errors
    assert int(dataset(result.dom, "diagrams")) >= 1, "no diagram on the page links to its SVG file"
    assert dataset(result.dom, "zoom") == "open", "tapping a diagram opened no overlay"
    assert dataset(result.dom, "loaded") == "yes", "the overlay's image did not load (a missing file?)"
    natural, big, shown = (int(dataset(result.dom, k)) for k in ("natural-width", "big-width", "shown-width"))
    assert big >= natural - 1, f"the overlay shrank the diagram to {big} px of its {natural}"
    assert big >= 2 * shown, f"the overlay shows it at {big} px, hardly larger than the page's {shown} px"
    assert dataset(result.dom, "scrolls") == "yes"
    assert dataset(result.dom, "after-escape") == "closed"
