"""Shared by the figure scripts: write a matplotlib figure as a reproducible SVG, in English and in Chinese.

Every script draws each of LANGUAGES: English to figures/generated/NAME.svg (the notebooks carry its PNG),
Chinese to NAME.zh_CN.svg and NAME.zh_CN.png (the Chinese site and notebooks show those instead).
"""
import warnings
from pathlib import Path

LANGUAGES = ("en", "zh_CN")
CJK_FONT = "Noto Sans CJK SC"          # Debian's fonts-noto-cjk; `make fonts` installs it


def localized(out: Path, language: str) -> Path:
    """Where the drawing in `language` goes: NAME.svg for English, NAME.zh_CN.svg for Chinese."""
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}; expected one of {LANGUAGES}")
    return out if language == "en" else out.with_name(f"{out.stem}.{language}{out.suffix}")


def use_language(language: str) -> None:
    """Set matplotlib's fonts for drawing in `language`: for Chinese, the CJK font as a fallback after
    the usual ones (so Latin letters, digits and formulas look as in the English drawing)."""
    import matplotlib
    from matplotlib import font_manager

    localized(Path("x.svg"), language)                     # refuses an unknown language
    keys = ("font.family", "font.monospace")
    if language == "en":
        matplotlib.rcParams.update({key: matplotlib.rcParamsOrig[key] for key in keys})
        return
    try:
        font_manager.findfont(font_manager.FontProperties(family=CJK_FONT), fallback_to_default=False)
    except ValueError:
        raise SystemExit(f"the Chinese drawings need the font {CJK_FONT!r}, which matplotlib cannot find; "
                         "install it (sudo apt-get install fonts-noto-cjk, or `make fonts`) and rerun") from None
    # the generic family last, so that a browser without the CJK font shows the SVG in its own sans-serif
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", CJK_FONT, "sans-serif"]
    matplotlib.rcParams["font.monospace"] = ["DejaVu Sans Mono", CJK_FONT, "monospace"]


def mono(language: str):
    """The font family for code and shapes: plain 'monospace' in English, and in Chinese the mono font
    with the CJK font after it (matplotlib does not fall back from a generic family)."""
    return "monospace" if language == "en" else ["DejaVu Sans Mono", CJK_FONT, "monospace"]


def translator(table: dict, language: str, figure: str):
    """t(text): the text as it is in English, its entry of `table` (English -> Chinese) in Chinese."""
    localized(Path("x.svg"), language)

    def t(text: str) -> str:
        if language == "en":
            return text
        if text not in table:
            raise KeyError(f"{figure}: no {language} text for {text!r}; add it to the script's ZH table")
        return table[text]
    return t


def save_svg(fig, out: Path, **savefig_kwargs) -> None:
    """Write `fig` to `out` (folders made as needed), and the same figure as a PNG beside it.

    No timestamp and fixed element ids, so reruns give the same files. The notebooks carry the PNG
    (scripts/sync_notebooks.py): Colab shows neither SVG images nor cell attachments in markdown.
    """
    import matplotlib

    out.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with matplotlib.rc_context({"svg.hashsalt": "llmlab-figures"}):   # else ids are salted at random
            fig.savefig(out, format="svg", metadata={"Date": None}, **savefig_kwargs)
        fig.savefig(out.with_suffix(".png"), format="png", dpi=150, metadata={"Software": None}, **savefig_kwargs)
    missing = sorted({str(w.message) for w in caught if "missing from" in str(w.message)})
    if missing:          # the PNG would show empty boxes where these characters belong
        raise SystemExit(f"{out.name}: characters the fonts cannot draw: {missing}")
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    print(f"wrote {out} and its .png")


def write_figure(draw, out: Path, language: str = "en", folder: Path | None = None, **savefig_kwargs) -> None:
    """What every figure script's main() does: draw the figure in `language` and write it (SVG and
    PNG, localized name) into `folder` (default: the folder of `out`), then free it."""
    import matplotlib.pyplot as plt

    fig = draw(language)
    save_svg(fig, localized(Path(folder or out.parent) / out.name, language), **savefig_kwargs)
    plt.close(fig)


def check_text_fits(fig, boxes, labels, figure: str, margin_px: float = 4.0) -> None:
    """Refuse to write a figure whose text runs over the edge of its box (boxes[i] holds the texts labels[i])."""
    renderer = fig.canvas.get_renderer()
    for box, texts in zip(boxes, labels):
        frame = box.get_window_extent(renderer)
        for text in texts:
            extent = text.get_window_extent(renderer)
            if extent.x0 < frame.x0 + margin_px or extent.x1 > frame.x1 - margin_px:
                raise SystemExit(f"{figure}: the text {text.get_text()!r} is wider than its box; "
                                 "widen the boxes or shorten the text")
