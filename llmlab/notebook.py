"""Small helpers for the book's notebooks: show llmlab's own source next to the text.

>>> import llmlab
>>> show_source(llmlab.attention.softmax)     # in a notebook: the function, highlighted
# llmlab.attention.softmax
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    ...
"""
from __future__ import annotations

import inspect
import sys
import textwrap
import warnings


class SourceView:
    """The source of one function or class, shown as a highlighted code block in Jupyter."""

    def __init__(self, obj):
        self.name = f"{obj.__module__}.{obj.__qualname__}"
        self.file = inspect.getsourcefile(obj)
        lines, self.first_line = inspect.getsourcelines(obj)
        self.code = textwrap.dedent("".join(lines)).rstrip()

    def _repr_markdown_(self) -> str:
        return f"`{self.name}` (from `{self.where()}`, line {self.first_line}):\n\n```python\n{self.code}\n```"

    def where(self) -> str:
        """The source file from its package's folder on: "llmlab/ffn.py" for a method of a class in it."""
        from pathlib import Path

        parts = Path(self.file).parts
        package = self.name.split(".", 1)[0]
        return "/".join(parts[len(parts) - 1 - parts[::-1].index(package):]) if package in parts else Path(self.file).name

    def __repr__(self) -> str:
        return f"# {self.name}\n{self.code}"


def show_source(obj) -> SourceView:
    """Return a view of `obj`'s source code; a notebook cell that ends with it displays it."""
    return SourceView(obj)


CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP")
_cjk_note_shown = False


def use_book_style() -> None:
    """Matplotlib defaults for the book: readable sizes, and a CJK font as fallback for Chinese labels.

    The CJK font is asked for only when it is installed: asking matplotlib for a missing family prints
    a `findfont` warning for every label drawn. Without one (Colab has none), one short note says that
    Chinese labels will show as boxes and how to install the font, and matplotlib's warning for each
    missing glyph is silenced.
    """
    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    global _cjk_note_shown
    installed = {font.name for font in font_manager.fontManager.ttflist}
    cjk = [name for name in CJK_FONTS if name in installed]
    if not cjk and not _cjk_note_shown:
        _cjk_note_shown = True
        print("Note: no CJK font is installed, so Chinese labels in figures show as boxes "
              "(install one with: apt-get install fonts-noto-cjk, then restart the kernel).")
        # that note says it once: not one "Glyph ... missing from font(s)" warning per Chinese character
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
    if "ipykernel" in sys.modules:
        # In Jupyter with matplotlib < 3.10, the inline backend (matplotlib-inline 0.2) sets itself up
        # when the first figure is made, and that first figure is never shown: load the backend now.
        plt.close(plt.figure())
        _show_figures_in_language()
    plt.rcParams.update({
        "font.family": ["DejaVu Sans", *cjk],
        "figure.dpi": 100,
        "savefig.dpi": 100,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "figure.figsize": (7, 3.5),
    })


FIGURE_COPIES = "LLMLAB_FIGURE_COPIES"   # the book's build: a folder for each shown figure's copy (Chinese site)


def _show_figures_in_language() -> None:
    """Route the notebook's figures through figure_language: in a notebook run in Chinese
    (LLMLAB_LANGUAGE=zh_CN) each figure is shown with the words of the figure catalog; while the book is
    built (LLMLAB_FIGURE_COPIES names a folder) the English figure is shown and a copy kept, from which
    the Chinese site draws the same figure with Chinese words."""
    import base64
    import os

    from IPython import get_ipython
    from matplotlib.figure import Figure

    from llmlab.exercises.language import current_language
    from llmlab.visualization import figure_language

    shell = get_ipython()
    if shell is None:
        return
    png = shell.display_formatter.formatters["image/png"]
    try:
        draw = png.lookup_by_type(Figure)
    except KeyError:   # no inline backend: figures are not shown as PNG
        return
    draw = getattr(draw, "drawn_in_english", draw)

    def shown(fig):
        data = draw(fig)
        if data is None:
            return None
        folder = os.environ.get(FIGURE_COPIES)
        if folder:
            raw = base64.b64decode(data) if isinstance(data, str) else data
            figure_language.keep_for_translation(fig, raw, folder)
        language = current_language()
        if language != "en":
            translated = figure_language.draw_in_language(fig, language)
            return base64.b64encode(translated).decode("ascii") if isinstance(data, str) else translated
        return data

    shown.drawn_in_english = draw
    png.for_type(Figure, shown)


def repository_url() -> str | None:
    """The repository llmlab is installed from (pyproject.toml's [project.urls] Repository), or None.

    pyproject.toml copies it from _config.yml, the one place the address is written (a test checks it).
    """
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        entries = metadata("llmlab").get_all("Project-URL") or []
    except PackageNotFoundError:
        return None
    for entry in entries:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "repository":
            return url.strip()
    return None


def install_command(extra: str | None = None) -> str:
    """The pip command that installs llmlab (with an extra) as it is published: from its repository.

    >>> install_command("instructor")         # doctest: +SKIP
    'pip install "llmlab[instructor] @ git+https://github.com/llmlab-book/llmlab"'
    """
    name = f"llmlab[{extra}]" if extra else "llmlab"
    url = repository_url()
    if url is None:                       # a source tree that was never installed
        return f'pip install -e ".[{extra}]"' if extra else "pip install -e ."
    return f'pip install "{name} @ git+{url}"'


def glue(name: str, value, display: bool = False):
    """Record `value` under `name` so that the book's prose can quote it: {glue:text}`name:.2f`.

    When the book is built, MyST-NB stores the value with the notebook's outputs and the markdown
    shows the number this very run computed. Where MyST-NB is not installed (Colab, a plain Jupyter)
    nothing is recorded, and with display=True the value is simply shown.
    """
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        if display:
            from IPython.display import display as show
            show(value)
        return
    myst_glue(name, value, display=display)
