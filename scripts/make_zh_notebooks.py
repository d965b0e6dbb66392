"""Write the Chinese notebooks: zh/chapters/<page>.ipynb and zh/practise/<page>.ipynb.

    .venv/bin/python scripts/make_zh_notebooks.py           # write zh/
    .venv/bin/python scripts/make_zh_notebooks.py --check   # exit 1 if a committed copy is out of date

The Chinese pages' Colab buttons open these. Each is its English notebook (chapters/ or practise/) with
the text of its markdown cells taken from the page's catalog (locales/zh_CN/LC_MESSAGES/chapters/
<page>.po, the same translation the Chinese site shows); code cells and their tags are the English
notebook's, byte for byte, except one line in the hidden setup cell that sets LLMLAB_LANGUAGE=zh_CN,
so that llmlab's checks answer in Chinese; each diagram is its Chinese drawing (figures/generated/
NAME.zh_CN.png, so run `make figures` first). A block whose translation is missing or fuzzy stays
English, as it does on the Chinese page. tests/test_zh_notebooks.py fails when a committed copy is out of date.
"""
from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
CATALOGS = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / "chapters"
OUT = ROOT / "zh"

# what may stand before a block of text on its line: a heading, a list or quote marker, the
# opening of a directive ("```{exercise} Title"), or nothing
LEAD = r"(?:[ \t]*(?:#{1,6}[ \t]+|[-*+][ \t]+|\d+[.)][ \t]+|>[ \t]*|(?:`{3,}|:{3,})\{[\w:-]+\}[ \t]+))?"


def translations(page: str) -> dict[str, str]:
    """msgid -> msgstr of the page's catalog, checked entries only (not empty, not fuzzy)."""
    from babel.messages.pofile import read_po

    po = CATALOGS / f"{page}.po"
    if not po.exists():
        return {}
    with open(po, "rb") as f:
        return {m.id: m.string for m in read_po(f, locale="zh_CN") if m.id and m.string and not m.fuzzy}


def translate_markdown(source: str, table: dict[str, str]) -> str:
    """Replace every whole block of `source` that the table translates (longest blocks first).

    A block matches when it fills its lines from after its marker to the end of a line; the
    catalog holds paragraphs with their line breaks turned into spaces, as Sphinx extracts them.

    >>> translate_markdown("## Summary\\n\\nOne line\\nand the next.\\n", {"Summary": "小结",
    ...                     "One line and the next.": "一行接一行。"})
    '## 小结\\n\\n一行接一行。\\n'
    """
    for english in sorted(table, key=len, reverse=True):
        words = [re.escape(w) for w in english.split()]
        if not words:
            continue
        # between two words: spaces, at most one line break, spaces, each run taken whole (possessive): with
        # `[ \t]*\n?[ \t]*` a space could go to either side, and a paragraph that matches a long entry up to
        # its last words (a copy one edit behind its catalog) took 2^words tries to fail
        pattern = re.compile(rf"(?m)^({LEAD})" + r"[ \t]*+(?:\n[ \t]*+)?+".join(words) + r"(?=[ \t]*$)")
        source = pattern.sub(lambda m: m.group(1) + table[english], source)
    return source


# a diagram as scripts/sync_notebooks.py writes it: ![alt](data:image/png;base64,... "NAME.svg")
DIAGRAM = re.compile(r'!\[(?P<alt>[^\]]*)\]\(data:image/png;base64,[A-Za-z0-9+/=]* "(?P<name>[\w.-]+)\.svg"\)')
FIGURES = ROOT / "figures" / "generated"


def chinese_diagrams(source: str, table: dict[str, str]) -> str:
    """Each diagram becomes its Chinese drawing (NAME.zh_CN.png, drawn by its figure script), with its
    alt text translated where the catalog has it."""
    def swap(match):
        import base64

        alt, name = match.group("alt"), match.group("name")
        png = FIGURES / f"{name}.zh_CN.png"
        if not png.exists():
            return match.group(0)
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        return f'![{table.get(alt, alt)}](data:image/png;base64,{data} "{name}.svg")'
    return DIAGRAM.sub(swap, source)


# the one line a Chinese notebook adds to its (hidden) setup cell: the checks answer in Chinese
LANGUAGE_LINE = 'os.environ.setdefault("LLMLAB_LANGUAGE", "zh_CN")   # llmlab\'s checks answer in Chinese'


def comment_translations(page: str) -> dict[str, str]:
    """The page's code catalog (locales/zh_CN/LC_MESSAGES/code/<page>.po): comment -> its Chinese text."""
    sys.path.insert(0, str(ROOT))
    from llmlab.exercises.messages import read_po

    po = CATALOGS.parent / "code" / "chapters" / f"{page}.po"
    return read_po(po.read_text(encoding="utf-8")) if po.exists() else {}


def translate_code(source: str, comments: dict[str, str]) -> str:
    """A code cell with its comments in Chinese (the code itself unchanged), as the Chinese page shows it."""
    sys.path.insert(0, str(ROOT / "_ext"))
    from llmlab_i18n import translate_comments

    return translate_comments(source, comments.get) if comments else source


def chinese_notebook(path: Path, page: str) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    out = copy.deepcopy(nb)
    table = translations(page)
    comments = comment_translations(page)
    for cell in out.cells:
        if cell.cell_type == "markdown":
            cell.source = chinese_diagrams(translate_markdown(cell.source, table), table)
        elif cell.cell_type == "code" and "colab-setup" not in cell.get("metadata", {}).get("tags", []):
            cell.source = translate_code(cell.source, comments)
        elif "colab-setup" in cell.get("metadata", {}).get("tags", []):
            lines = cell.source.split("\n")
            at = next((i + 1 for i, line in enumerate(lines) if line.startswith("import os")), None)
            if at is None:
                raise SystemExit(f"{path}: its setup cell no longer imports os; put {LANGUAGE_LINE!r} after it by hand")
            cell.source = "\n".join(lines[:at] + [LANGUAGE_LINE] + lines[at:])
    out.metadata.setdefault("llmlab", {})["language"] = "zh_CN"
    return out


def sources() -> list[tuple[Path, Path, str]]:
    """(English notebook, Chinese notebook, page whose catalog translates it)."""
    pairs = []
    for folder in ("chapters", "practise"):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            pairs.append((path, OUT / folder / path.name, path.stem))
    return pairs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed copy is out of date")
    args = parser.parse_args(argv)
    stale = []
    for english, chinese, page in sources():
        text = nbformat.writes(chinese_notebook(english, page)) + "\n"
        if args.check:
            if not chinese.exists() or chinese.read_text(encoding="utf-8") != text:
                stale.append(str(chinese.relative_to(ROOT)))
            continue
        chinese.parent.mkdir(parents=True, exist_ok=True)
        chinese.write_text(text, encoding="utf-8")
    expected = {c for _, c, _ in sources()}
    extra = [p for p in OUT.rglob("*.ipynb") if p not in expected]
    if args.check:
        stale += [str(p.relative_to(ROOT)) + " (no English notebook)" for p in extra]
        if stale:
            print("out of date (run: python scripts/make_zh_notebooks.py):\n  " + "\n  ".join(stale))
            return 1
        print(f"{len(expected)} Chinese notebooks are current")
        return 0
    for p in extra:
        p.unlink()
    print(f"wrote {len(expected)} Chinese notebooks into {OUT.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
