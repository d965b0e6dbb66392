"""Open built pages of the book in headless Chromium with the network closed and look at them."""
from pathlib import Path

import pytest

from browser import open_in_browser, read_png

HTML = Path(__file__).resolve().parents[1] / "_build" / "html"

# After the widgets render, type a number into the linked box and read the slider's label back:
# the link runs in the browser (widgets.jslink), so this works with no kernel behind the page.
TYPE_INTO_THE_WIDGET = """
setTimeout(function () {
  var box = document.querySelector('.widget-text input');
  var out = document.body.dataset;
  out.widgets = document.querySelectorAll('.jupyter-widgets').length;
  out.math = document.querySelectorAll('mjx-container').length;
  if (!box) { out.error = 'no text box rendered'; return; }
  box.value = '77';
  box.dispatchEvent(new Event('input', {bubbles: true}));
  box.dispatchEvent(new Event('change', {bubbles: true}));
  box.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', keyCode: 13, bubbles: true}));
  box.blur();
  setTimeout(function () {
    var readout = document.querySelector('.widget-readout');
    out.readout = readout ? readout.textContent.trim() : 'missing';
  }, 500);
}, 3000);
"""


def page(name):
    path = HTML / name
    if not path.exists():
        pytest.fail(f"{path} is missing: build the book first with `make book` (make test does it)")
    return path


def test_setup_page_typesets_math_and_runs_its_widget(tmp_path):
    shot = tmp_path / "setup.png"
    result = open_in_browser(page("chapters/00_setup.html"), js=TYPE_INTO_THE_WIDGET, screenshot=shot,
                             width=1200, height=2400, wait_ms=8000)
    assert not result.errors, result.errors
    assert 'data-error=' not in result.dom, result.dom[result.dom.find("data-error"):][:200]
    assert 'data-math="0"' not in result.dom and "data-math=" in result.dom, "MathJax typeset nothing"
    assert 'data-widgets="0"' not in result.dom and "data-widgets=" in result.dom, "no widget rendered"
    assert 'data-readout="77"' in result.dom, "the slider did not follow the linked text box"
    pixels = read_png(shot)
    assert pixels.std() > 0.05, "the screenshot is blank"


def test_front_page_typesets_math(tmp_path):
    result = open_in_browser(page("intro.html"), js="setTimeout(function () {"
                             "document.body.dataset.math = document.querySelectorAll('mjx-container').length;}, 3000);",
                             screenshot=tmp_path / "intro.png", wait_ms=6000)
    assert not result.errors, result.errors
    assert "data-math=" in result.dom and 'data-math="0"' not in result.dom
