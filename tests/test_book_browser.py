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
    if Path(name).name[:2].isdigit() and Path(name).name[:2] != "00":
        widgets = int(dataset(result.dom, "widgets"))
        assert views + widgets > 0, "every chapter needs an interactive view that works in the static page"
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
    for chapter, pairs in make_glossary.chapter_terms().items():
        files = list((HTML / "chapters").glob(f"{chapter:02d}_*.html"))
        if not files:
            continue
        links = set(re.findall(r'href="appendix_glossary.html#(term-[^"]+)"', files[0].read_text()))
        assert links <= anchors
        assert links, f"chapter {chapter} links none of the terms it introduces"
        linked += len(links)
    assert linked >= len(terms) // 2


def test_chapter_12_attention_table_fits_a_wide_screen(tmp_path):
    js = """setTimeout(function () {
      var box = document.querySelector('.llmlab-attention .llmlab-scroll');
      document.body.dataset.fits = box ? (box.scrollWidth <= box.clientWidth) : 'no view';
    }, 3000);"""
    result = open_in_browser(page("chapters/12_training.html"), js=js, width=1800, height=1200, wait_ms=6000,
                             screenshot=tmp_path / "12-1800.png")
    assert not result.errors, result.errors
    assert dataset(result.dom, "fits") == "true", "the attention table scrolls sideways at 1800 px"
