"""The Chinese edition of the book: its catalogs and its build.

The English notebooks and pages are the one source. Their text is extracted into one gettext
catalog per page, ``locales/zh_CN/LC_MESSAGES/<page>.po``, and the Chinese site is built from the
same sources with those catalogs, taking every notebook's outputs from the execution cache that
the English build filled (nothing is executed twice).

    python scripts/book_i18n.py catalogs   # after editing English text: update the catalogs
    python scripts/book_i18n.py status     # per page: entries, translated, fuzzy, untranslated
    python scripts/book_i18n.py build      # the Chinese site, into _build/html/zh (make book runs it)

How an English change reaches the Chinese page: ``catalogs`` re-extracts the text; a paragraph
that is new gets an empty entry, a paragraph that changed keeps its old translation marked
``fuzzy`` (shown in English until a translator checks it and removes the flag), a paragraph that
is gone is dropped. ``tests/test_i18n.py`` fails while any entry is empty or fuzzy.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCALE = "zh_CN"
CATALOGS = ROOT / "locales" / LOCALE / "LC_MESSAGES"
BUILD = ROOT / "_build"
HEADER = ("# The Chinese text of one page of the book. Written by hand; updated from the English page\n"
          "# by `python scripts/book_i18n.py catalogs` (a changed paragraph becomes fuzzy).")


def _sphinx(builder: str, outdir: Path, doctrees: Path, overrides: dict, strict: bool) -> int:
    from jupyter_book.sphinx import build_sphinx

    config = {
        "external_toc_path": str(ROOT / "_toc.yml"),
        "latex_individualpages": False,
        **overrides,
    }
    return build_sphinx(ROOT, outdir, noconfig=True, path_config=str(ROOT / "_config.yml"),
                        confoverrides=config, builder=builder, doctreedir=doctrees,
                        freshenv=True, warningiserror=strict, keep_going=strict, quiet=True)


def extract(outdir: Path = BUILD / "gettext") -> Path:
    """The English text of every page as gettext templates (.pot), one per page."""
    # text only: outputs are not translated, so nothing needs executing
    result = _sphinx("gettext", outdir, BUILD / ".doctrees-gettext",
                     {"nb_execution_mode": "off",   # so glued values are missing: do not say so
                      "suppress_warnings": ["mystnb.unknown_mime_type", "mystnb.glue"]}, strict=False)
    if result:
        raise SystemExit(f"extracting the English text failed (sphinx returned {result})")
    return outdir


def plot_alt_texts(notebook: Path) -> list[str]:
    """The alt texts that a notebook's code cells give their plots (metadata mystnb.image.alt): Sphinx
    does not extract them, and the Chinese pages translate them (_ext/llmlab_i18n.py)."""
    if not notebook.exists():
        return []
    import nbformat

    alts = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt")
        if cell.cell_type == "code" and alt and alt not in alts:
            alts.append(alt)
    return alts


PROMPT_COMMENT = "the toggle of a folded code cell"


def code_prompts(notebook: Path) -> list[str]:
    """The words a notebook's folded code cells show on their toggle ("Show the plotting code"), where a
    cell sets its own (metadata mystnb.code_prompt_show / code_prompt_hide); the Chinese pages translate them."""
    if not notebook.exists():
        return []
    import nbformat

    prompts = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        own = cell.get("metadata", {}).get("mystnb", {})
        for key in ("code_prompt_show", "code_prompt_hide"):
            if cell.cell_type == "code" and own.get(key) and own[key] not in prompts:
                prompts.append(own[key])
    return prompts


EXERCISE_TITLE = re.compile(r"^\s*(?:`{3,}|:{3,})\{exercise(?:-start)?\}[ \t]+(.+?)\s*$", re.M)
EXERCISE_COMMENT = "title of an exercise"


def exercise_titles(notebook: Path) -> list[str]:
    """The titles of a notebook's exercises ("```{exercise} Read the next token"): sphinx-exercise keeps
    them where Sphinx's gettext does not look, and the Chinese pages translate them (_ext/llmlab_i18n.py)."""
    if not notebook.exists():
        return []
    import nbformat

    titles = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type == "markdown":
            titles += [t for t in EXERCISE_TITLE.findall(cell.source) if t not in titles]
    return titles


VIEW_TEXT = re.compile(r'"(?:title|legend)": ("(?:[^"\\]|\\.)*")')
VIEW_COMMENT = "text of a view drawn by the page's code"


def view_texts(page: str) -> list[str] | None:
    """The titles and legends of the views on the English page, read from the last build (they are
    computed by the page's code); None when the page has not been built."""
    import json

    built = BUILD / "html" / f"{page}.html"
    if not built.exists():
        return None
    texts = []
    for literal in VIEW_TEXT.findall(built.read_text(encoding="utf-8")):
        text = json.loads(literal)
        if text and text not in texts:
            texts.append(text)
    return texts


def update_catalogs(templates: Path, only: list[str] | None = None) -> list[str]:
    """Merge every template into its page's catalog (or only those of the pages `only` names);
    return a line per page on what changed."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import read_po, write_po

    # every checked translation of the book: a paragraph that moved to another page (a lesson's
    # paragraph now in its lab) keeps its translation there
    memory = {}
    for po in CATALOGS.rglob("*.po"):
        with open(po, "rb") as f:
            memory.update({m.id: m.string for m in read_po(f, locale=LOCALE)
                           if m.id and m.string and not m.fuzzy})
    report = []
    seen = set()
    for pot in sorted(templates.rglob("*.pot")):
        page = pot.relative_to(templates).with_suffix("")
        if page.parts[0].startswith("_"):
            continue
        seen.add(page.as_posix())
        if only and page.as_posix() not in only:
            continue
        with open(pot, "rb") as f:
            template = read_po(f)
        for alt in plot_alt_texts(ROOT / page.with_suffix(".ipynb")):
            if alt not in template:
                template.add(alt, auto_comments=["alt text of a plot drawn by the page's code"])
        for title in exercise_titles(ROOT / page.with_suffix(".ipynb")):
            if title not in template:
                template.add(title, auto_comments=[EXERCISE_COMMENT])
        for prompt in code_prompts(ROOT / page.with_suffix(".ipynb")):
            if prompt not in template:
                template.add(prompt, auto_comments=[PROMPT_COMMENT])
        po = CATALOGS / page.with_suffix(".po")
        views = view_texts(page.as_posix())
        if views is None and po.exists():      # not built: keep the view texts the catalog has
            with open(po, "rb") as f:
                views = [m.id for m in read_po(f, locale=LOCALE) if VIEW_COMMENT in m.auto_comments]
        for text in views or []:
            if text not in template:
                template.add(text, auto_comments=[VIEW_COMMENT])
        if po.exists():
            with open(po, "rb") as f:
                catalog = read_po(f, locale=LOCALE)
            before = {m.id: (m.string, m.fuzzy) for m in catalog if m.id}
            created = catalog.creation_date
            catalog.update(template, no_fuzzy_matching=False, update_header_comment=False)
            catalog.creation_date = created    # the header changes only when a translator edits
            after = {m.id: (m.string, m.fuzzy) for m in catalog if m.id}
            new = sum(1 for k in after if k not in before)
            fuzzy = sum(1 for k, (s, f) in after.items() if f and not before.get(k, ("", False))[1])
            gone = sum(1 for k in before if k not in after)
            report.append(f"{page}: {len(after)} entries, {new} new, {fuzzy} newly fuzzy, {gone} dropped")
        else:
            catalog = Catalog(locale=LOCALE, project="Inside a Language Model", fuzzy=False,
                              header_comment=HEADER, copyright_holder="The llmlab authors",
                              msgid_bugs_address="https://github.com/llmlab-book/llmlab/issues", version="1", last_translator="The llmlab authors",
                              language_team="The llmlab authors", creation_date=template.creation_date,
                              revision_date=template.creation_date)
            for message in template:
                if message.id:
                    catalog.add(message.id, "", auto_comments=message.auto_comments)
            report.append(f"{page}: new catalog, {len(catalog)} entries")
        for message in catalog:
            if message.id and not message.string and message.id in memory:
                message.string = memory[message.id]
        po.parent.mkdir(parents=True, exist_ok=True)
        with open(po, "wb") as f:
            # no source locations (they move with every edit); no wrapping (one paragraph, one line)
            write_po(f, catalog, width=0, no_location=True, ignore_obsolete=True, sort_output=False)
    for po in sorted(CATALOGS.rglob("*.po")):
        page = po.relative_to(CATALOGS).with_suffix("").as_posix()
        if po.is_relative_to(CODE_CATALOGS):       # the code cells' catalogs: `code` keeps them
            continue
        if page not in seen and not only:
            report.append(f"{page}: the page is gone from the book; its catalog was removed")
            po.unlink()
    return report


ROLE = re.compile(r"(?<!`)\{([\w:-]+)\}`([^`]*)`")   # not `{solution}` written as code
CODE = re.compile(r"(?<![}`])`([^`]+)`")
MATH = re.compile(r"\$\$.+?\$\$|\$[^$]+\$", re.S)
URL = re.compile(r"\]\(([^)\s]+)\)")


def markup(text: str) -> dict[str, list[str]]:
    """What a translation must carry over unchanged: roles and their targets (a role's shown
    text may be translated: {doc}`第 5 章 <05_self_attention>`), inline code, formulas, link targets."""
    roles = []
    for name, content in ROLE.findall(text):
        target = re.search(r"<([^<>]+)>\s*$", content)
        target = (target.group(1) if target else content).strip()
        if name.startswith("glue"):
            # a glued English word has a Chinese variant, glued beside it as <key>_zh
            key, _, form = target.partition(":")
            target = key.removesuffix("_zh") + (":" + form if form else "")
        roles.append(f"{name}:{target}")
    without_roles = ROLE.sub("", text)
    return {"roles": sorted(roles), "code": sorted(CODE.findall(without_roles)),
            "formulas": sorted(m.strip() for m in MATH.findall(without_roles)),
            "links": sorted(URL.findall(text))}


def bold_pairs_hold(text: str) -> bool:
    """Whether every ** of `text` can open or close emphasis as CommonMark reads it (in order: opener,
    closer, ...). An opener must be left-flanking, a closer right-flanking."""
    import unicodedata

    def kind(ch):
        if not ch or ch.isspace():
            return "space"
        return "punct" if unicodedata.category(ch)[0] in "PS" else "letter"

    for i, match in enumerate(re.finditer(r"(?<!\*)\*\*(?!\*)", re.sub(r"`[^`]*`|\$[^$]*\$", "", text))):
        source = match.string
        before, after = kind(source[match.start() - 1:match.start()]), kind(source[match.end():match.end() + 1])
        if i % 2 == 0:   # opens: not before a space; before punctuation only after a space or punctuation
            ok = after != "space" and (after != "punct" or before in ("space", "punct"))
        else:            # closes: not after a space; after punctuation only before a space or punctuation
            ok = before != "space" and (before != "punct" or after in ("space", "punct"))
        if not ok:
            return False
    return True


def check_entry(msgid: str, msgstr: str) -> list[str]:
    """Problems of one translated entry: markup lost, changed or added."""
    if not msgstr:
        return []
    want, got = markup(msgid), markup(msgstr)
    problems = [f"{kind}: the English has {want[kind]}, the translation {got[kind]}"
                for kind in want if want[kind] != got[kind]]
    if not bold_pairs_hold(msgstr) and bold_pairs_hold(msgid):
        problems.append("a ** would show as asterisks: CommonMark opens ** only before a letter or after a "
                        "space/punctuation, and closes it only after a letter or before a space/punctuation "
                        "(write **读者**。 not **读者。**在, and “**词元**” not **“词元”** after a character)")
    if re.match(r"\d+[a-z]?[.)]\s", msgstr):
        # the translation is parsed as markdown on its own: "5. 自注意力" would become a list
        problems.append("starts like a numbered list item: write a chapter title as 第 5 章　自注意力")
    return problems


def check() -> list[str]:
    """Every problem of every catalog, as 'page: msgid...: problem'."""
    from babel.messages.pofile import read_po

    problems = []
    for po in sorted(CATALOGS.rglob("*.po")):
        with open(po, "rb") as f:
            catalog = read_po(f, locale=LOCALE)
        page = po.relative_to(CATALOGS).with_suffix("").as_posix()
        for m in catalog:
            if m.id:
                problems += [f"{page}: {m.id[:60]!r}: {p}" for p in check_entry(m.id, m.string)]
    return problems


def status() -> list[tuple[str, int, int, int, int]]:
    """(page, entries, translated, fuzzy, untranslated) for every catalog."""
    from babel.messages.pofile import read_po

    rows = []
    for po in sorted(CATALOGS.rglob("*.po")):
        with open(po, "rb") as f:
            catalog = read_po(f, locale=LOCALE)
        messages = [m for m in catalog if m.id]
        fuzzy = sum(1 for m in messages if m.fuzzy)
        empty = sum(1 for m in messages if not m.string)
        rows.append((po.relative_to(CATALOGS).with_suffix("").as_posix(), len(messages),
                     len(messages) - fuzzy - empty, fuzzy, empty))
    return rows


def build(strict: bool = True) -> int:
    """The Chinese site into _build/html/zh, reading outputs from the English build's cache."""
    import shutil

    import yaml

    excluded = yaml.safe_load((ROOT / "_config.yml").read_text())["exclude_patterns"]
    # built beside the English site, then moved into it: MyST-NB writes its scratch copies of the
    # executed notebooks next to the output folder (outdir/../jupyter_execute), which must not land
    # inside the English site
    staging = BUILD / "html-zh" / "zh"
    shutil.rmtree(staging.parent, ignore_errors=True)
    chinese_figures()
    result = _sphinx("html", staging, BUILD / ".doctrees-zh", {
        "language": LOCALE,
        "html_title": "语言模型的内部",
        # the live model (assets/live, assets/vendor/live: 120 MB) is not copied again: the Chinese
        # pages load the English site's copy (<meta name="llmlab-live-static">, _ext/llmlab_i18n.py)
        "exclude_patterns": [*excluded, "live", "vendor/live"],
        "html_search_language": "zh",     # Sphinx splits Chinese words for search with jieba
        "nb_execution_mode": "cache",     # a page not in the cache would be executed: see make book
    }, strict=strict)
    if not result:
        target = BUILD / "html" / "zh"
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(str(staging), str(target))
        shutil.rmtree(staging.parent, ignore_errors=True)
        share_sources(target, BUILD / "html")
    return result


FIGURE_COPIES = BUILD / "figure_copies"


def chinese_figures(folder: Path = FIGURE_COPIES) -> int:
    """Draw every figure the English execution kept (scripts/execute_book.py) with the words of
    llmlab's figure catalog (llmlab/locale/zh_CN/LC_MESSAGES/figures.po): NAME.zh_CN.png, which the
    Chinese pages show in place of the English image NAME.png (_ext/llmlab_i18n.py). Seconds, not a re-run."""
    from llmlab.visualization.figure_language import draw_kept

    return draw_kept(folder, LOCALE) if folder.is_dir() else 0


# --------------------------------------------------------------------------- the words inside code cells
#
# A page's code cells carry English a reader needs: the comments of the shown code, and the lines its
# code prints. They get a catalog of their own per page, locales/zh_CN/LC_MESSAGES/code/<page>.po, whose
# entries are the comments (exact text after "# ") and the printed lines as templates (each number a
# numbered field {0}, {1}, ..., as in llmlab/visualization/figure_language.py, so that a line whose
# numbers differ on another machine is the same entry). The Chinese pages show both translated
# (_ext/llmlab_i18n.py, ChineseCode); the code itself, strings included, stays as it runs. What check()
# prints is translated from llmlab's own message catalog instead (llmlab/exercises/messages.py).

CODE_CATALOGS = CATALOGS / "code"
COMMENT_NOTE = "comment in the page's code"
PRINTED_NOTE = "printed by the page's code"
HIDDEN_TAGS = {"remove-input", "remove-cell"}


def code_comments(source: str) -> list[str]:
    r"""The comments of a code cell, each without its "#" and surrounding spaces, in order; then the lines
    of its docstrings (a reader reads them as comments; _ext/llmlab_i18n.py translates both).

    >>> code_comments('x = 1   # one token\ny = "# not a comment"\n# (B, T, d)')
    ['one token', '(B, T, d)']
    >>> code_comments("def f(x):\n    \'\'\'Twice x.\'\'\'\n    return 2 * x   # (B,)")
    ['(B,)', 'Twice x.']
    """
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    found = []
    for token in tokens:
        if token.type == tokenize.COMMENT:
            text = token.string.lstrip("#").strip()
            if text and not text.startswith("!") and text not in found:
                found.append(text)
    if str(ROOT / "_ext") not in sys.path:
        sys.path.insert(0, str(ROOT / "_ext"))
    from llmlab_i18n import docstring_lines

    found += [text for *_, text in docstring_lines(source) if text not in found]
    return found


def printed_lines(cell) -> list[str]:
    """The lines a cell's outputs show as text (streams, plain-text results that have no richer form, the
    cells of an HTML table), as templates, for the lines with English words; none for a cell that calls
    check()."""
    import html

    from llmlab.visualization.figure_language import needs_words, template

    if "check(" in cell.source:
        return []
    texts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            texts.append(output.get("text", ""))
        elif output.get("output_type") in ("execute_result", "display_data"):
            data = output.get("data", {})
            if "text/plain" in data and not any(k.startswith(("image/", "text/html", "text/markdown",
                                                              "application/")) for k in data):
                texts.append(data["text/plain"])
    for output in cell.get("outputs", []):        # a table shown as HTML (not a view: views carry a script)
        table = output.get("data", {}).get("text/html", "")
        if "<table" in table and "<script" not in table:
            texts += [html.unescape(t) for t in TABLE_TEXT.findall(table)]
    lines = []
    for text in texts:
        for line in text.splitlines():
            if needs_words(line):
                key = template(line.strip())[0]
                if key not in lines:
                    lines.append(key)
    return lines


TABLE_TEXT = re.compile(r">([^<>]*[A-Za-z]{2,}[^<>]*)<")     # the text between a table's tags


def executed_notebook(notebook: Path):
    """The notebook with the outputs of its last execution, from the build's execution cache; None if
    the cache has no run of the notebook as it is now."""
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(str(BUILD / ".jupyter_cache"))
    try:
        return cache.merge_match_into_notebook(nbformat.read(notebook, as_version=4))[1]
    except KeyError:
        return None


def code_texts(page: str) -> tuple[list[str], list[str]]:
    """(comments of the page's shown code, lines its outputs print) for one page, from the notebook and
    from its last execution (the build's cache); ([], []) for a page with no notebook."""
    import nbformat

    notebook = ROOT / f"{page}.ipynb"
    if not notebook.exists():
        return [], []
    comments = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type == "code" and not HIDDEN_TAGS & set(cell.metadata.get("tags", [])):
            comments += [c for c in code_comments(cell.source) if c not in comments]
    printed = []
    executed = executed_notebook(notebook)
    if executed is not None:
        for cell in executed.cells:
            tags = set(cell.metadata.get("tags", []))
            if cell.cell_type == "code" and not {"remove-output", "remove-cell"} & tags:
                printed += [line for line in printed_lines(cell) if line not in printed and line not in comments]
    return comments, printed


def book_pages() -> list[str]:
    """The pages of the book that are notebooks ("chapters/05_self_attention"), in the table of contents' order."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from execute_book import book_notebooks

    return [page for page in book_notebooks() if (ROOT / f"{page}.ipynb").exists()]


def update_code_catalogs(pages: list[str]) -> list[str]:
    """Write code/<page>.po for each page: every comment and printed line an entry, translations kept,
    entries no longer on the page dropped. A line per page on what changed."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import read_po, write_po

    report = []
    for page in pages:
        comments, printed = code_texts(page)
        po = CODE_CATALOGS / f"{page}.po"
        old = {}
        if po.exists():
            with open(po, "rb") as f:
                old = {m.id: m for m in read_po(f, locale=LOCALE) if m.id}
        if not comments and not printed:
            if po.exists():
                po.unlink()
            continue
        catalog = Catalog(locale=LOCALE, project="Inside a Language Model", fuzzy=False,
                          header_comment=HEADER.replace("one page of the book", "one page's code cells"),
                          copyright_holder="The llmlab authors")
        loose = {" ".join(k.split()): m for k, m in old.items()}
        for text, note in [(c, COMMENT_NOTE) for c in comments] + [(p, PRINTED_NOTE) for p in printed]:
            # a printed line padded differently (numbers of another width) keeps its translation
            kept = old.get(text) or (loose.get(" ".join(text.split())) if note == PRINTED_NOTE else None)
            catalog.add(text, kept.string if kept else "", auto_comments=[note],
                        flags=kept.flags if kept else ())
        po.parent.mkdir(parents=True, exist_ok=True)
        with open(po, "wb") as f:
            write_po(f, catalog, width=0, no_location=True, ignore_obsolete=True, sort_output=False)
        new = sum(1 for m in catalog if m.id and m.id not in old)
        gone = sum(1 for k in old if k not in {m.id for m in catalog})
        report.append(f"{page}: {len(comments)} comments, {len(printed)} printed lines; {new} new, {gone} dropped")
    return report


def figure_words(folder: Path = FIGURE_COPIES) -> tuple[list[str], list[str]]:
    """(labels the kept figures need, their categorical tick labels with words), as catalog templates."""
    import json

    wanted, ticks = [], []
    for kept in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        words = json.loads(kept.read_text(encoding="utf-8"))
        wanted += [w for w in words["wanted"] if w not in wanted]
        ticks += [t for t in words["ticks"] if t not in ticks and t not in wanted]
    return wanted, ticks


def update_figure_catalog(folder: Path = FIGURE_COPIES) -> str:
    """Add to llmlab's figure catalog every label the last build's figures show that it lacks (empty, for a
    translator); entries are never dropped (a label may be drawn only on another machine)."""
    from babel.messages.pofile import read_po, write_po
    from llmlab.visualization.figure_language import catalog_path

    wanted, ticks = figure_words(folder)
    po = catalog_path(LOCALE)
    with open(po, "rb") as f:
        catalog = read_po(f, locale=LOCALE)
    have = {m.id for m in catalog if m.id}
    added = 0
    for text, note in [(w, "label of a plot") for w in wanted] + [(t, "tick label of a plot") for t in ticks]:
        if text not in have:
            catalog.add(text, "", auto_comments=[note])
            added += 1
    with open(po, "wb") as f:
        write_po(f, catalog, width=0, no_location=True, ignore_obsolete=True, sort_output=False)
    return f"{po.relative_to(ROOT)}: {len(wanted)} labels and {len(ticks)} tick labels in the build's figures; {added} added"


def share_sources(zh: Path, english: Path) -> int:
    """The page sources behind each page's download button (_sources/: the notebooks, 4 MiB) are the
    same files in both editions: keep the English copy only, and point the Chinese pages' links at it.
    A source that differs (an appendix written in MyST, whose Chinese text differs) keeps its own copy.
    Returns how many files were shared."""
    import os

    shared = set()
    for path in (zh / "_sources").rglob("*"):
        twin = english / "_sources" / path.relative_to(zh / "_sources")
        if path.is_file() and twin.is_file() and path.read_bytes() == twin.read_bytes():
            shared.add(path.resolve())
    link = re.compile(r'href="([^"]*_sources/[^"]+)"')
    for page in zh.rglob("*.html"):
        def to_english(match):
            target = (page.parent / match.group(1)).resolve()
            if target not in shared:
                return match.group(0)
            twin = english / "_sources" / target.relative_to((zh / "_sources").resolve())
            return f'href="{os.path.relpath(twin, page.parent)}"'
        text = page.read_text(encoding="utf-8")
        new = link.sub(to_english, text)
        if new != text:
            page.write_text(new, encoding="utf-8")
    for path in shared:
        path.unlink()
    return len(shared)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("catalogs", help="extract the English text and update locales/zh_CN")
    c.add_argument("--only", nargs="+", metavar="PAGE", help="update only these pages' catalogs "
                   "(chapters/05_self_attention ...)")
    k = sub.add_parser("code", help="update the catalogs of the pages' code comments and printed lines "
                       "(locales/zh_CN/LC_MESSAGES/code/; the printed lines come from the last build)")
    k.add_argument("--only", nargs="+", metavar="PAGE", help="only these pages (chapters/05_self_attention ...)")
    sub.add_parser("figures", help="add the labels of the last build's plots to llmlab's figure catalog")
    sub.add_parser("status", help="how complete each page's catalog is")
    sub.add_parser("check", help="translations that lost or changed code, formulas, roles or links")
    b = sub.add_parser("build", help="build the Chinese site into _build/html/zh")
    b.add_argument("--no-strict", action="store_true", help="do not turn warnings into errors")
    args = parser.parse_args(argv)

    if args.command == "catalogs":
        for line in update_catalogs(extract(), args.only):
            print(line)
        return 0
    if args.command == "code":
        for line in update_code_catalogs(args.only or book_pages()):
            print(line)
        return 0
    if args.command == "figures":
        print(update_figure_catalog())
        return 0
    if args.command == "check":
        problems = check()
        print("\n".join(problems) or "every translated entry keeps its markup")
        return 1 if problems else 0
    if args.command == "status":
        rows = status()
        if not rows:
            print(f"no catalogs under {CATALOGS}: run `python scripts/book_i18n.py catalogs`")
            return 1
        width = max(len(r[0]) for r in rows)
        print(f"{'page':<{width}}  entries  translated  fuzzy  untranslated")
        for page, n, done, fuzzy, empty in rows:
            print(f"{page:<{width}}  {n:7d}  {done:10d}  {fuzzy:5d}  {empty:12d}")
        total = [sum(r[i] for r in rows) for i in range(1, 5)]
        print(f"{'all pages':<{width}}  {total[0]:7d}  {total[1]:10d}  {total[2]:5d}  {total[3]:12d}")
        return 0
    result = build(strict=not args.no_strict)
    if result:
        print(f"the Chinese build failed (sphinx returned {result}); the messages are above",
              file=sys.stderr)
    return 1 if result else 0


if __name__ == "__main__":
    sys.exit(main())
