"""Drive headless Chromium from tests: open an HTML file offline, run some JS, read back the DOM.

One Chromium process does everything: it loads the page with the network closed, runs the
page's own scripts, runs `js` after the load event (e.g. dispatch a mouseover), lets virtual
time pass so timers fire, then dumps the DOM and (optionally) writes a screenshot.

    result = open_in_browser(tmp_path / "view.html",
                             js="document.querySelector('td').dispatchEvent(new MouseEvent('mouseover', {bubbles: true}))",
                             screenshot=tmp_path / "view.png")
    assert "expected text" in result.dom
    assert not result.errors            # no uncaught JS exceptions, no failed loads

`js` runs inside a try/catch; an exception it throws is reported in `result.errors`.
A test may write whatever it wants to check into the DOM (e.g. `document.body.dataset.out = ...`).
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

# Chromium's windows are at least 500 px wide, even headless; narrower viewports (a phone at 420 px)
# are an iframe of that width inside a 500 px window.
MIN_WINDOW_WIDTH = 500

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")

# Closed network: every host name fails to resolve and every proxied request goes to a dead port.
OFFLINE_FLAGS = (
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
)

BASE_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
)

_CONSOLE = re.compile(r'CONSOLE[^\]]*\]\s*"(.*)", source: (.*)$')


@dataclasses.dataclass
class BrowserResult:
    dom: str                 # document.documentElement.outerHTML after the scripts ran
    console: list[str]       # every console message, in order
    errors: list[str]        # uncaught exceptions, failed resource loads, errors thrown by `js`
    screenshot: Path | None  # the PNG written, if one was asked for


def find_chromium() -> str:
    """Path of a Chromium binary; raise a clear error if none is installed."""
    for path in (os.environ.get("CHROMIUM"),) + CHROMIUM_CANDIDATES:
        if path and os.path.exists(path):
            return path
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    raise RuntimeError("No Chromium found. Install it (apt-get install chromium) or set CHROMIUM=/path/to/chrome.")


def _inject(html: str, js: str | None) -> str:
    """Append a script that runs `js` after the load event and records any error it throws."""
    if not js:
        return html
    runner = (
        "<script>window.addEventListener('load', function () {\n"
        "  try {\n" + js + "\n  } catch (e) {\n"
        "    console.error('Uncaught test-js error: ' + e + (e && e.stack ? ' ' + e.stack : ''));\n"
        "  }\n});</script>\n"
    )
    index = html.lower().rfind("</body>")
    return html[:index] + runner + html[index:] if index >= 0 else html + runner


def _narrow_wrapper(page: Path, width: int, height: int) -> Path:
    """A page holding `page` in an iframe `width` px wide; it keeps a copy of the iframe's DOM in a textarea."""
    wrapper = page.with_name(f".{page.stem}.narrow-{width}.html")
    wrapper.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body style='margin:0'>"
        f"<iframe id='llmlab-frame' src='{page.name}' style='border:0;width:{width}px;height:{height}px'></iframe>"
        "<textarea id='llmlab-inner-dom' style='display:none'></textarea><script>"
        "setInterval(function () { try { var d = document.getElementById('llmlab-frame').contentDocument;"
        " if (d && d.documentElement) document.getElementById('llmlab-inner-dom').textContent = d.documentElement.outerHTML;"
        " } catch (e) {} }, 200);</script></body></html>", encoding="utf-8")
    return wrapper


def open_in_browser(html_path, js: str | None = None, screenshot=None, width: int = 1000, height: int = 700,
                    offline: bool = True, wait_ms: int = 2000, timeout_s: float = 60.0) -> BrowserResult:
    """Open `html_path` in headless Chromium and return the resulting DOM, console and errors.

    html_path : an .html file. When `js` is given, a copy with the extra script is opened from the
                same folder (so relative links to _static/ etc. keep working), then deleted.
    js        : JavaScript run after the load event.
    screenshot: where to write a PNG of the viewport (width x height), or None.
    width     : the viewport width; below 500 px the page is opened in an iframe that wide (and
                `dom` is the iframe's DOM).
    offline   : close the network (DNS fails, proxy is a dead port).
    wait_ms   : virtual time allowed for timers/animations after load.
    """
    html_path = Path(html_path).resolve()
    if not html_path.exists():
        raise FileNotFoundError(f"{html_path} does not exist; write the page before opening it.")
    page = html_path
    if js:
        page = html_path.with_name(f".{html_path.stem}.browser-test.html")
        page.write_text(_inject(html_path.read_text(encoding="utf-8"), js), encoding="utf-8")
    wrapper = _narrow_wrapper(page, width, height) if width < MIN_WINDOW_WIDTH else None
    profile = tempfile.mkdtemp(prefix="llmlab-chromium-")
    args = [find_chromium(), *BASE_FLAGS, *(OFFLINE_FLAGS if offline else ()),
            f"--user-data-dir={profile}", f"--virtual-time-budget={wait_ms}",
            f"--window-size={max(width, MIN_WINDOW_WIDTH)},{height}"]
    if wrapper is not None:
        args.append("--allow-file-access-from-files")      # lets the wrapper read the iframe's DOM
    if screenshot is not None:
        screenshot = Path(screenshot).resolve()
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        args.append(f"--screenshot={screenshot}")
    args += ["--dump-dom", (wrapper or page).as_uri()]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
        if page != html_path:
            page.unlink(missing_ok=True)
        if wrapper is not None:
            wrapper.unlink(missing_ok=True)
    console = []
    for line in proc.stderr.splitlines():
        match = _CONSOLE.search(line)
        if match:
            console.append(match.group(1))
    errors = [c for c in console if c.startswith("Uncaught") or "Failed to load resource" in c
              or c.startswith("Refused to")]
    if proc.returncode != 0 or "<html" not in proc.stdout.lower():
        raise RuntimeError(f"Chromium failed (exit {proc.returncode}) on {html_path}:\n{proc.stderr[-3000:]}")
    dom = proc.stdout
    if wrapper is not None:
        import html

        inner = re.search(r'<textarea id="llmlab-inner-dom"[^>]*>(.*?)</textarea>', dom, re.S)
        if not inner or not inner.group(1).strip():
            raise RuntimeError(f"The page in the {width} px frame never loaded: {html_path}")
        dom = html.unescape(inner.group(1))
    if screenshot is not None and not screenshot.exists():
        raise RuntimeError(f"Chromium did not write the screenshot {screenshot}:\n{proc.stderr[-3000:]}")
    return BrowserResult(dom=dom, console=console, errors=errors, screenshot=screenshot)


def read_png(path):
    """The screenshot as a float array (H, W, channels) in [0, 1] (uses matplotlib's PNG reader)."""
    import matplotlib.image

    return matplotlib.image.imread(str(path))
