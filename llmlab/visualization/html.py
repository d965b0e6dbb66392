"""The machinery every view shares: embed data as JSON next to a small plain-DOM script.

A view is an object with `_repr_html_()`. Displaying it in a notebook cell puts one block of
HTML into the output:

    <div class="llmlab-view" id="llmlab-attention-3f2a91c0">   <- the script fills this div
      ...a static HTML/CSS rendering, shown until the script runs (or if it never does)...
    </div>
    <style> ...scoped to .llmlab-view... </style>
    <script> common.js + attention.js + render(root, {"tokens": [...], ...}) </script>

Nothing is fetched from the network (no CDN, no require.js), so the same block keeps working
in a static Jupyter Book page, in Colab, in JupyterLab and in a saved .html file. Every render
gets a fresh id, so several views (or the same view twice) can sit on one page.
"""
from __future__ import annotations

import base64
import html
import json
import os
import uuid
from pathlib import Path

import numpy as np

ASSETS = Path(__file__).parent / "assets"


def read_asset(name: str) -> str:
    """Text of a file shipped in llmlab/visualization/assets/ (the JS and CSS of the views)."""
    return (ASSETS / name).read_text(encoding="utf-8")


def to_json(data) -> str:
    """JSON that is safe inside a <script> element.

    '</script>' in a token string would end the script early, so '<' is escaped; U+2028/U+2029
    are legal in JSON but not in older JavaScript string literals.

    >>> to_json({"t": "</script>"})
    '{"t": "\\\\u003c/script>"}'
    """
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def pack_unit_floats(array) -> str:
    """Numbers in [0, 1] -> one byte each (value * 255), base64. Shrinks attention maps ~6x.

    >>> pack_unit_floats([0.0, 1.0])
    'AP8='
    """
    values = np.clip(np.asarray(array, dtype=np.float64), 0.0, 1.0)
    return base64.b64encode(np.round(values * 255).astype(np.uint8).tobytes()).decode("ascii")


def visible(token) -> str:
    """A token as the book shows it (see llmlab.visualization.display.show_token):
    ' Paris' -> '␣Paris', '\\n' -> '↵', byte fragments -> '<e4>', '<bos>' -> '⟨bos⟩'.

    >>> visible(" Paris\\n")
    '␣Paris↵'
    """
    from llmlab.visualization.display import show_token

    return show_token(token)


def escape(text) -> str:
    return html.escape(str(text), quote=True)


def to_list(array, decimals: int | None = 4):
    """A tensor / array / list -> nested Python lists of rounded floats (for JSON)."""
    if hasattr(array, "detach"):
        array = array.detach().float().cpu().numpy()
    array = np.asarray(array, dtype=np.float64)
    if decimals is not None:
        array = np.round(array, decimals)
    return array.tolist()


# The book's live model (llmlab.live: SmolLM2-135M in the reader's browser). A view with `live` in its
# data gets a prompt box and a "Run live" button in the built book (see common.js, L.mount).
LIVE_MODEL = {"name": "SmolLM2-135M", "n_layers": 30, "n_heads": 9, "d_model": 576}


def live_data(live, prompt: str, steer=None) -> dict:
    """What a view puts under data["live"]: {} when off, else the prompt box's opening text, and
    steer = (vector, layer, scale) when the view shows a steered model (the live run adds it too)."""
    if live not in (True, False):
        raise TypeError(f"live must be True, False or None (automatic); got {live!r}.")
    if not live:
        return {}
    out = {"prompt": prompt}
    if steer is not None:
        vector, layer, scale = steer
        vector = np.asarray(vector.detach().cpu() if hasattr(vector, "detach") else vector, dtype=np.float32).reshape(-1)
        if vector.size != LIVE_MODEL["d_model"]:
            raise ValueError(f"The live model's steering vector has {LIVE_MODEL['d_model']} numbers (SmolLM2's d_model); "
                             f"got {vector.size}.")
        out["steer"] = {"layer": int(layer), "scale": float(scale), "vector": [float(x) for x in vector]}
    return {"live": out}


class View:
    """Base class: a subclass sets `kind` (its assets/<kind>.js) and fills `self.data`.

    Subclasses may override `static_html()` to give an HTML/CSS-only rendering that is shown
    before the script runs and is what the live ipywidgets show (scripts do not run there).
    """

    kind = ""

    def __init__(self, data: dict, title: str | None = None):
        self.data = dict(data)
        self.title = title
        if title is not None:
            self.data["title"] = title

    def static_html(self) -> str:
        return "<em>This view needs JavaScript.</em>"

    def to_html(self) -> str:
        """The HTML fragment: a div with a unique id, the CSS, and the script that fills the div.

        In the built book (LLMLAB_BOOK_BUILD=1) every page loads the views' scripts and styles once, in
        its head (`book_assets`, added by the book's Sphinx extension), so a view carries only its data
        and the call that draws it; anywhere else (Jupyter, Colab, a saved page) it carries everything."""
        view_id = f"llmlab-{self.kind}-{uuid.uuid4().hex[:10]}"
        standalone = not in_book_build()
        script = (
            (read_asset("common.js") + "\n" + read_asset(f"{self.kind}.js") + "\n" if standalone else "")
            + "(function () {\n"
            + "  var s = document.currentScript;\n"
            # In JupyterLab the output may not be attached to the document yet when the
            # script runs, so look next to the script first, then in the document.
            + f"  var root = (s && s.parentNode && s.parentNode.querySelector('#{view_id}')) || document.getElementById('{view_id}');\n"
            # mount: the view itself, plus a "Run live" prompt box where the data asks for one (common.js)
            + f"  window.llmlab.mount(root, '{self.kind}', {to_json(self.data)});\n"
            # Marks a view that JavaScript has drawn (the book's browser tests look for it).
            + "  root.setAttribute('data-rendered', 'yes');\n"
            + "})();"
        )
        return (
            f'<div class="llmlab-view llmlab-{self.kind}" id="{view_id}">{self.static_html()}</div>\n'
            + (f"<style>{read_asset('views.css')}</style>\n" if standalone else "")
            + f"<script>\n{script}\n</script>\n"
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def save(self, path) -> Path:
        """Write a standalone HTML page holding only this view; return the path."""
        path = Path(path)
        title = escape(self.title or f"llmlab {self.kind} view")
        page = (
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{title}</title>\n{chinese_texts_script()}</head>\n<body>\n{self.to_html()}</body>\n</html>\n"
        )
        path.write_text(page, encoding="utf-8")
        return path


def in_book_build() -> bool:
    """True while `make book` executes the chapters (it sets LLMLAB_BOOK_BUILD=1)."""
    return os.environ.get("LLMLAB_BOOK_BUILD") == "1"


def book_assets() -> tuple[str, str]:
    """(script, style) that every page of the built book loads once in its head: common.js, then every
    view's own script (each defines window.llmlab.views[kind] on top of common.js), and views.css. The
    views of the page then carry only their data (see View.to_html). zh.js is not a view: the Chinese
    pages load it on their own."""
    kinds = sorted(p.name for p in ASSETS.glob("*.js") if p.name not in ("common.js", "zh.js"))
    script = "\n".join(read_asset(name) for name in ["common.js", *kinds])
    return script, read_asset("views.css")


def chinese_texts_script() -> str:
    """The views' Chinese texts (assets/zh.js), once per page, in its <head>: a page whose <html lang>
    starts with "zh" then shows every view in Chinese (L.t in common.js). A notebook output has no such
    page, so the views do not carry it each; the book's Chinese site loads it as a file
    (_ext/llmlab_i18n.py), and a standalone page written here carries it inline."""
    return f"<script>\n{read_asset('zh.js')}\n</script>\n"


def save_page(views, path, title: str = "llmlab views") -> Path:
    """Write several views into one standalone HTML page (each keeps its own id)."""
    path = Path(path)
    body = "\n".join(view.to_html() for view in views)
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{escape(title)}</title>\n{chinese_texts_script()}</head>\n<body>\n{body}</body>\n</html>\n"
    )
    path.write_text(page, encoding="utf-8")
    return path


def css_blue(value: float) -> str:
    """Background colour for a value in [0, 1] (same scale as the JS views)."""
    value = float(min(max(value, 0.0), 1.0))
    return f"rgba(31,119,180,{value:.3f})"


def css_diverging(value: float, vmax: float = 1.0) -> str:
    """Blue for positive, red for negative, transparent at 0 (same scale as the JS views)."""
    alpha = min(abs(float(value)) / vmax, 1.0) if vmax > 0 else 0.0
    return f"rgba(31,119,180,{alpha:.3f})" if value >= 0 else f"rgba(214,39,40,{alpha:.3f})"


def text_colour(alpha: float) -> str:
    return "#fff" if alpha > 0.55 else "#111"
