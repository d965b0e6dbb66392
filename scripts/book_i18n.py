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
    sub.add_parser("status", help="how complete each page's catalog is")
    sub.add_parser("check", help="translations that lost or changed code, formulas, roles or links")
    b = sub.add_parser("build", help="build the Chinese site into _build/html/zh")
    b.add_argument("--no-strict", action="store_true", help="do not turn warnings into errors")
    args = parser.parse_args(argv)

    if args.command == "catalogs":
        for line in update_catalogs(extract(), args.only):
            print(line)
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
