"""Figures in the reader's language: the words of a matplotlib figure through a message catalog.

A page's code labels its plots in English (``ax.set_title("Knocking out one FFN at a time")``). The words
of a finished figure (titles, axis labels, legend entries, notes placed with ``ax.text``, and the tick
labels the catalog knows) are looked up in ``locale/<language>/LC_MESSAGES/figures.po``, with every
number in a label replaced by a numbered field, so that "after block 12: 0.93" and "after block 3: 0.41"
are one entry, ``"after block {0}: {1}"``. A label without an entry stays as it is.

Where it is used:
- in a notebook run in Chinese (``LLMLAB_LANGUAGE=zh_CN``, as the Chinese notebooks set it), each figure is
  shown with its Chinese words (``show_in_language``, installed by ``llmlab.notebook.use_book_style``);
- in the book's build, each figure the English execution shows is kept (pickled) next to the English
  image, named by the image's hash, and the Chinese site draws it again with the catalog's words
  (``draw_in_language``): the same execution, the same numbers, only the words differ.

>>> from matplotlib.figure import Figure
>>> fig = Figure(); ax = fig.add_subplot()
>>> _ = ax.set_title("Residual-stream norm in SmolLM2-135M"); _ = ax.set_xlabel("after block 12: 0.93")
>>> template("after block 12: 0.93")
('after block {0}: {1}', ['12', '0.93'])
>>> wanted(fig)
['Residual-stream norm in SmolLM2-135M', 'after block {0}: {1}']
"""
from __future__ import annotations

import io
import re
from functools import lru_cache
from pathlib import Path

LOCALE = Path(__file__).resolve().parents[1] / "locale"
DOMAIN = "figures"

# a number standing alone: not part of a name such as SmolLM2-135M, Gemma-3 or top-5
# a number: digits with decimal point or thousands commas, a sign, an exponent, or a factor's "x" ("2.1x the
# time": the digits are a field, the x stays in the words)
NUMBER = re.compile(r"(?<![\w.\-])[-−]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?(?:(?=x(?!\w))|(?![\w.]))"
                    r"|(?<![\w.\-])[-−]?\.\d+(?![\w.])")
FIELD = re.compile(r"\{(\d+)\}")
LETTERS = re.compile(r"[A-Za-z]{2,}")


def catalog_path(language: str) -> Path:
    return LOCALE / language / "LC_MESSAGES" / f"{DOMAIN}.po"


@lru_cache(maxsize=None)
def catalog(language: str) -> dict[str, str]:
    """The language's figure catalog, template -> template ({} for English or when there is none)."""
    from llmlab.exercises.messages import read_po

    path = catalog_path(language)
    if language == "en" or not path.exists():
        return {}
    return read_po(path.read_text(encoding="utf-8"))


def template(text: str) -> tuple[str, list[str]]:
    """A label as its catalog entry: each number a numbered field, and the numbers in order.

    >>> template("x 4.28; up on 19 of 24 prompts")
    ('x {0}; up on {1} of {2} prompts', ['4.28', '19', '24'])
    >>> template("SmolLM2-135M, top-5")
    ('SmolLM2-135M, top-5', [])
    >>> template("12.9x the work, one 2048x2048 matrix")
    ('{0}x the work, one 2048x2048 matrix', ['12.9'])
    """
    numbers: list[str] = []

    def field(match):
        numbers.append(match.group(0))
        return "{%d}" % (len(numbers) - 1)

    return NUMBER.sub(field, text.replace("{", "{{").replace("}", "}}")), numbers


def translated(text: str, language: str) -> str | None:
    """The label in `language` from the catalog, its numbers filled in; None when the catalog lacks it."""
    key, numbers = template(text)
    entry = catalog(language).get(key)
    if entry is None:
        return None
    return FIELD.sub(lambda m: numbers[int(m.group(1))], entry).replace("{{", "{").replace("}}", "}")


def needs_words(text: str) -> bool:
    """Whether a label holds English words a reader must read (two letters or more in a row)."""
    return bool(LETTERS.search(text))


def labels(fig):
    """(kind, Text) for each piece of text of a figure that a translation may change. Kinds: title,
    xlabel, ylabel, legend, text (ax.text, annotations, fig.text), tick (read only when the catalog has it)."""
    found = []
    for text in [fig._suptitle, getattr(fig, "_supxlabel", None), getattr(fig, "_supylabel", None)]:
        if text is not None:
            found.append(("title", text))
    found += [("text", t) for t in fig.texts]
    for ax in fig.axes:
        for title in (ax.title, ax._left_title, ax._right_title):
            found.append(("title", title))
        found.append(("xlabel", ax.xaxis.label))
        found.append(("ylabel", ax.yaxis.label))
        legend = ax.get_legend()
        if legend is not None:
            found.append(("legend", legend.get_title()))
            found += [("legend", t) for t in legend.get_texts()]
        found += [("text", t) for t in ax.texts]
        found += [("tick", t) for t in ax.get_xticklabels() + ax.get_yticklabels()]
    for legend in getattr(fig, "legends", []):
        found.append(("legend", legend.get_title()))
        found += [("legend", t) for t in legend.get_texts()]
    return found


def wanted(fig) -> list[str]:
    """The catalog entries a figure needs: every label with English words but the tick labels (those are
    usually tokens or numbers, translated only when the catalog lists them)."""
    keys = []
    for kind, text in labels(fig):
        words = text.get_text()
        if kind != "tick" and words and needs_words(words):
            keys.append(template(words)[0])
    return list(dict.fromkeys(keys))


def render_png(fig) -> bytes:
    """The figure as PNG bytes, drawn as the notebook's inline backend draws it (tight box, its own dpi)."""
    buffer = io.BytesIO()
    fig.canvas.print_figure(buffer, format="png", dpi=fig.dpi, bbox_inches="tight",
                            facecolor=fig.get_facecolor(), edgecolor=fig.get_edgecolor())
    return buffer.getvalue()


def fixed_ticks(fig):
    """The tick formatters that hold their labels as a list (categorical ticks: tokens, names, blocks)."""
    from matplotlib.ticker import FixedFormatter

    return [formatter for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
            for formatter in [axis.get_major_formatter()] if isinstance(formatter, FixedFormatter)]


def tick_words(fig) -> list[str]:
    """Categorical tick labels with English words: translated when the catalog lists them, else kept
    (they are often tokens, which stay as the model wrote them)."""
    keys = [template(str(label))[0] for formatter in fixed_ticks(fig) for label in formatter.seq
            if needs_words(str(label))]
    return list(dict.fromkeys(keys))


def draw_in_language(fig, language: str) -> bytes:
    """The figure as PNG with its words in `language` (those the catalog has); the figure is left as it was."""
    texts, formatters = [], []
    try:
        for kind, text in labels(fig):
            words = text.get_text()
            new = translated(words, language) if words and kind != "tick" else None
            if new is not None and new != words:
                texts.append((text, words))
                text.set_text(new)
        for formatter in fixed_ticks(fig):
            seq = list(formatter.seq)
            new = [translated(str(label), language) or label for label in seq]
            if new != seq:
                formatters.append((formatter, seq))
                formatter.seq = new
        return render_png(fig)
    finally:
        for text, words in texts:
            text.set_text(words)
        for formatter, seq in formatters:
            formatter.seq = seq


def keep_for_translation(fig, shown: bytes, folder: str | Path) -> Path:
    """The build's copy of a figure the English page shows: NAME.zh_CN.png (drawn now with the figure
    catalog's words), NAME.pickle (the figure itself, so that the Chinese site can draw it again when the
    catalog changed since: a figure that cannot be pickled, a lambda in its formatter, keeps its drawing)
    and NAME.json (the entries it needs); NAME is the hash of the English PNG, which is also the name of
    the page's image file."""
    import hashlib
    import json
    import pickle

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(shown).hexdigest()
    (folder / f"{name}.json").write_text(json.dumps({"wanted": wanted(fig), "ticks": tick_words(fig)},
                                                    ensure_ascii=False))
    try:
        (folder / f"{name}.pickle").write_bytes(pickle.dumps(fig))
    except Exception:
        pass
    (folder / f"{name}.zh_CN.png").write_bytes(draw_in_language(fig, "zh_CN"))
    return folder / name


def draw_kept(folder: str | Path, language: str = "zh_CN") -> int:
    """Draw again, in `language`, each kept figure whose drawing (NAME.<language>.png) is missing or older
    than the figure catalog (a translation changed after the pages ran); the number drawn."""
    import pickle

    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    catalog.cache_clear()
    count = 0
    words = catalog_path(language)
    changed = words.stat().st_mtime if words.exists() else 0.0
    for kept in sorted(Path(folder).glob("*.pickle")):
        drawing = kept.with_name(f"{kept.stem}.{language}.png")
        if drawing.exists() and drawing.stat().st_mtime >= changed:
            continue
        fig = pickle.loads(kept.read_bytes())
        drawing.write_bytes(draw_in_language(fig, language))
        plt.close(fig)
        count += 1
    return count
