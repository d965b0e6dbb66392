"""The book in two languages.

The English site is built into ``_build/html`` and the Chinese one into ``_build/html/zh``
(scripts/book_i18n.py), from the same notebooks and the same execution cache; the Chinese text
comes from the catalogs in ``locales/zh_CN/LC_MESSAGES``. This extension adds what Sphinx's own
translation does not do:

- every page gets, above its text, a link to its twin (``chapters/05_self_attention.html`` <->
  ``zh/chapters/05_self_attention.html``) and ``<link rel="alternate" hreflang>`` tags; a Chinese
  page with entries left untranslated says how many;
- the table of contents' part titles, glued values inside translated paragraphs, the diagrams'
  Chinese drawings and alt texts, and the titles and legends of views are translated;
- the Chinese pages' Colab buttons open the Chinese notebooks, and their live model is the English
  site's copy.
"""
from __future__ import annotations

import html as html_lib
import re
from html import escape
from os import path

from docutils import nodes
from sphinx import addnodes
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.i18n import docname_to_domain

# language code -> (the name readers look for, the hreflang value, the site's folder under _build/html)
LANGUAGES = {
    "en": ("English", "en", ""),
    "zh_CN": ("中文", "zh-CN", "zh/"),
}


def _language(app) -> str:
    return app.config.language if app.config.language in LANGUAGES else "en"


def twin_href(pagename: str, here: str, there: str) -> str:
    """Relative address, from page `pagename` of the `here` site, of the same page in `there`.

    >>> twin_href("chapters/05_self_attention", "en", "zh_CN")
    '../zh/chapters/05_self_attention.html'
    >>> twin_href("intro", "zh_CN", "en")
    '../intro.html'
    """
    up = "../" * pagename.count("/")
    to_root = up + ("../" if LANGUAGES[here][2] else "")   # the English root, from this page
    return f"{to_root}{LANGUAGES[there][2]}{pagename}.html"


def page_catalog(env):
    """The gettext catalog of the page being read, in the build's language: (catalog, whether it exists)."""
    domain = docname_to_domain(env.docname, env.config.gettext_compact)
    dirs = [path.join(env.srcdir, d) for d in env.config.locale_dirs]
    return init_locale(dirs, env.config.language, domain)


def add_language_switch(app, pagename, templatename, context, doctree):
    if app.builder.format != "html" or doctree is None:
        return
    here = _language(app)
    links, tags = [], []
    for code, (name, hreflang, _) in LANGUAGES.items():
        href = twin_href(pagename, here, code)
        tags.append(f'<link rel="alternate" hreflang="{hreflang}" href="{escape(href)}" />')
        if code != here:
            links.append(f'<a class="llmlab-lang-link" href="{escape(href)}" hreflang="{hreflang}" '
                         f'lang="{hreflang}">{name}</a>')
    if LANGUAGES[here][2]:
        # the live model's 120 MB ship once, in the English site's _static/ (scripts/book_i18n.py)
        up = "../" * pagename.count("/")
        tags.append(f'<meta name="llmlab-live-static" content="{up}../_static/" />')
    context["metatags"] = context.get("metatags", "") + "\n".join(tags)
    label = "本页的其他语言版本" if here == "zh_CN" else "This page in another language"
    notice = ""
    left = untranslated(app, pagename) if here != "en" else 0
    if left:
        notice = (f'<div class="admonition warning llmlab-untranslated"><p>本页还有 {left} 段尚未译成中文，'
                  f'暂以英文显示。</p></div>\n')
    if here == "zh_CN" and "cell_input" in context.get("body", ""):
        # the code is the code that ran: its comments and what it printed are translated, its strings are not
        notice += ('<p class="llmlab-zh-code-note">说明：代码保持原样，其中的注释、程序输出和图中的文字已译成中文；'
                   '代码里 print 的字符串仍是英文，所以你自己运行时看到的输出是英文的。</p>\n')
    context["body"] = (f'<nav class="llmlab-lang" aria-label="{label}">{" · ".join(links)}</nav>\n'
                       + notice + context.get("body", ""))


def untranslated(app, pagename: str) -> int:
    """How many entries of the page's catalog are empty or fuzzy (shown in English)."""
    from babel.messages.pofile import read_po

    for folder in app.config.locale_dirs:
        po = path.join(app.srcdir, folder, app.config.language, "LC_MESSAGES", pagename + ".po")
        if path.exists(po):
            with open(po, "rb") as f:
                return sum(1 for m in read_po(f, locale=app.config.language)
                           if m.id and (not m.string or m.fuzzy))
    return 0


class TranslateToctreeCaptions(SphinxTransform):
    """The part titles of the table of contents ("Part I. The big picture") in the page's language.

    Sphinx translates a page's text in a transform that runs before the table of contents is
    inserted into the front page (sphinx_external_toc, priority 100), so its captions would stay
    English; this looks them up in the front page's catalog after they are inserted."""
    default_priority = 110

    def apply(self, **kwargs):
        if _language(self.app) == "en":
            return
        catalog, has_catalog = page_catalog(self.env)
        if not has_catalog:
            return
        for node in self.document.findall(addnodes.toctree):
            caption = node.get("rawcaption") or node.get("caption")
            if caption and catalog.gettext(caption) != caption:
                node["caption"] = catalog.gettext(caption)


class _KeepRenderer(dict):
    """A document's attributes that keep MyST-NB's notebook renderer when the parser drops it."""
    kept = None

    def pop(self, key, *default):
        value = super().pop(key, *default)
        if key == "nb_renderer":
            self.kept = value
        return value


def _keep_the_notebook(parse):
    """Glued values inside translated text. Sphinx parses each translation as a small document of
    its own, after the page is parsed, and MyST-NB's glue roles look for the page's notebook on the
    document they sit in; the parser drops it when it finishes the page. This keeps it for the
    page being read (env.temp_data), and `_glue_from_the_page` hands it to those small documents."""
    def parse_and_keep(self, inputstring, document):
        document.attributes = _KeepRenderer(document.attributes)
        try:
            parse(self, inputstring, document)
        finally:
            kept, document.attributes = document.attributes.kept, dict(document.attributes)
            env = getattr(document.settings, "env", None)
            if env is not None and not document.current_source.endswith("<translated>"):
                env.temp_data["llmlab_nb_renderer"] = kept
    return parse_and_keep


def _glue_from_the_page(retrieve):
    def retrieve_glue_data(document, key):
        if "nb_renderer" in document:
            return retrieve(document, key)
        env = getattr(document.settings, "env", None)
        renderer = env.temp_data.get("llmlab_nb_renderer") if env is not None else None
        if renderer is None:
            return retrieve(document, key)
        document["nb_renderer"] = renderer
        try:
            return retrieve(document, key)
        finally:
            del document["nb_renderer"]     # the doctree is pickled: it must not hold the renderer
    return retrieve_glue_data


FIGURE_NAME = re.compile(r"^[\w.-]+\.svg$")


class Diagrams(SphinxTransform):
    """Each diagram is served as its figure script's SVG file: on a Chinese page the Chinese drawing,
    with its alt text translated; on an English page the English one. A notebook carries its diagrams
    as PNG data named by the figure's SVG (`![alt](data:image/png;base64,... "NAME.svg")`,
    scripts/sync_notebooks.py), so that it works alone in Colab; the scripts in figures/ draw NAME.svg
    and NAME.zh_CN.svg. In the book a file, not a data: URI, is what a tap can open full size (a browser
    refuses to open a data: URI as a page) and what a phone can zoom without blurring."""
    default_priority = 400     # after the page is parsed and translated, before its images are collected

    def apply(self, **kwargs):
        language = _language(self.app)
        catalog, has_catalog = None, False
        if language != "en":
            catalog, has_catalog = page_catalog(self.env)
        suffix = ".svg" if language == "en" else f".{language}.svg"
        for node in self.document.findall(nodes.image):
            name = node.get("title") or path.basename(node.get("uri", ""))
            drawn_for = name[:-4].rpartition(".")[2]              # "zh_CN" in NAME.zh_CN.svg
            if FIGURE_NAME.match(name) and drawn_for not in LANGUAGES:
                drawing = f"figures/generated/{name[:-4]}{suffix}"
                if path.exists(path.join(self.env.srcdir, drawing)):
                    node["uri"] = "/" + drawing
                    node.attributes.pop("candidates", None)
                    node.attributes.pop("title", None)      # the file's name, not a caption
            if has_catalog and node.get("alt") and catalog.gettext(node["alt"]) != node["alt"]:
                node["alt"] = catalog.gettext(node["alt"])


class ExerciseTitles(SphinxTransform):
    """An exercise's own title ("```{exercise} Read the next token") from the page's catalog: sphinx-exercise
    keeps it in a subtitle node that Sphinx's gettext does not extract, so scripts/book_i18n.py puts the
    titles into the catalog itself (`exercise_titles`) and this transform puts the translation in place."""
    default_priority = 400

    def apply(self, **kwargs):
        from sphinx_exercise.nodes import exercise_subtitle

        language = _language(self.app)
        if language == "en":
            return
        catalog, has_catalog = page_catalog(self.env)
        if not has_catalog:
            return
        for node in self.document.findall(exercise_subtitle):
            english = node.astext()
            chinese = catalog.gettext(english)
            if chinese != english:
                node.children = []
                node += nodes.Text(chinese)


DOC_QUOTES = re.compile(r'^[rRuU]?("""|\'\'\')|("""|\'\'\')$')


def docstring_lines(source: str) -> list[tuple[int, int, int, str]]:
    r"""The lines of the docstrings of a cell's functions and classes, as (row, start, end, text): the text
    of each line without its quotes and indentation, and where it stands in the cell's row-th line.
    A docstring is a comment a reader reads; its lines are translated like comments (doctest lines aside).

    >>> docstring_lines("def f(x):\n    '''Twice x.\n\n    Plain.'''\n    return 2 * x")
    [(1, 7, 15, 'Twice x.'), (3, 4, 10, 'Plain.')]
    """
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines, found = source.split("\n"), []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not node.body:
            continue
        first = node.body[0]
        if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            continue
        doc = first.value
        for row in range(doc.lineno - 1, doc.end_lineno):
            raw = lines[row].encode()       # ast's columns count bytes
            start = len(raw[:doc.col_offset].decode()) if row == doc.lineno - 1 else 0
            end = len(raw[:doc.end_col_offset].decode()) if row == doc.end_lineno - 1 else len(lines[row])
            part = lines[row][start:end]
            inner = DOC_QUOTES.sub("", part.strip())
            text = inner.strip()
            if not text or text.startswith((">>>", "...")) or not re.search(r"[A-Za-z]{2}", text):
                continue
            at = lines[row].index(text, start)
            found.append((row, at, at + len(text), text))
    return found


def translate_comments(source: str, lookup) -> str:
    r"""A cell's source with each comment's text, and each line of its docstrings, replaced by lookup(text)
    where that is not None.

    >>> translate_comments('x = 1   # one token\ns = "# kept"', {"one token": "一个词元"}.get)
    'x = 1   # 一个词元\ns = "# kept"'
    >>> translate_comments("def f():\n    '''One token.'''", {"One token.": "一个词元。"}.get)
    "def f():\n    '''一个词元。'''"
    """
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    lines = source.split("\n")
    for token in reversed([t for t in tokens if t.type == tokenize.COMMENT]):
        text = token.string.lstrip("#").strip()
        new = lookup(text) if text else None
        (row, start), (_, end) = token.start, token.end
        if new and row <= len(lines):
            hashes = token.string[:len(token.string) - len(token.string.lstrip("#"))]
            lines[row - 1] = lines[row - 1][:start] + f"{hashes} {new}" + lines[row - 1][end:]
    for row, start, end, text in reversed(docstring_lines(source)):
        new = lookup(text)
        if new:
            lines[row] = lines[row][:start] + new + lines[row][end:]
    return "\n".join(lines)


def printed_lookup(entries: dict):
    """The translation of a printed line's template: the catalog's entry, or else the entry that differs from
    it only in its runs of spaces (a column padded for numbers of another width on another machine)."""
    loose = {" ".join(k.split()): v for k, v in entries.items()}
    return lambda key: entries.get(key) or loose.get(" ".join(key.split()))


def translate_printed(text: str, lookup) -> str:
    """Printed output with each line that the catalog lists (as a template: numbers are fields) translated."""
    from llmlab.visualization.figure_language import FIELD, needs_words, template

    out = []
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped and needs_words(stripped):
            key, numbers = template(stripped)
            new = lookup(key)
            if new:
                filled = FIELD.sub(lambda m: numbers[int(m.group(1))], new).replace("{{", "{").replace("}}", "}")
                line = line[:len(line) - len(line.lstrip())] + filled
        out.append(line)
    return "\n".join(out)


class ChineseCode(SphinxTransform):
    """On a Chinese page, the comments of the code cells and the lines their outputs print, from the page's
    code catalog (locales/zh_CN/LC_MESSAGES/code/<page>.po, written by `scripts/book_i18n.py code`); what
    check() prints, from llmlab's message catalog. The code itself (names, strings) is left as it runs."""
    default_priority = 400

    def apply(self, **kwargs):
        language = _language(self.app)
        if language == "en":
            return
        from llmlab.exercises.messages import read_po, translate

        po = path.join(self.env.srcdir, "locales", language, "LC_MESSAGES", "code", f"{self.env.docname}.po")
        entries = {}
        if path.exists(po):
            with open(po, encoding="utf-8") as f:
                entries = read_po(f.read())
        printed = printed_lookup(entries)
        text_catalog, _ = page_catalog(self.env)
        for cell in self.document.findall(nodes.container):
            if cell.get("nb_element") != "cell_code":
                continue
            for key, default in (("prompt_show", "展开"), ("prompt_hide", "收起")):
                if cell.get(key):          # a folded cell's toggle: the book's default, or the cell's own words
                    cell[key] = default if "{type}" in cell[key] else text_catalog.gettext(cell[key])
            source = ""
            for part in cell.children:
                if not isinstance(part, nodes.container):
                    continue
                for block in part.findall(nodes.literal_block):
                    if part.get("nb_element") == "cell_code_source":
                        source = block.astext()
                        new = translate_comments(source, entries.get) if entries else source
                    elif part.get("nb_element") == "cell_code_output":
                        text = block.astext()
                        new = translate(text, language) if "check(" in source else translate_printed(text, printed)
                    else:
                        continue
                    if new != block.astext():
                        block.rawsource = new
                        block.children = [nodes.Text(new)]
                if part.get("nb_element") != "cell_code_output":
                    continue
                for raw in part.findall(nodes.raw):
                    text = raw.astext()
                    if raw.get("format") != "html":
                        continue
                    if "llmlab-view" in text or "llmlab-note" in text:   # a view: its text before its script runs
                        new = translate_view_html(text)
                    elif "<script" in text:
                        continue
                    elif "check(" in source:           # check()'s verdict: its words from llmlab's catalog
                        new = HTML_TEXT.sub(lambda m: ">" + escape(translate(html_lib.unescape(m.group(1)), language),
                                                                   quote=False) + "<", text)
                    elif "<table" in text and entries:    # a table shown as HTML
                        new = TABLE_TEXT.sub(lambda m: ">" + translate_printed(m.group(1), printed) + "<", text)
                    else:
                        continue
                    if new != text:
                        raw.rawsource = new
                        raw.children = [nodes.Text(new)]


_JS_STRING = r"'((?:[^'\\]|\\.)*)'"
ZH_ENTRY = re.compile(_JS_STRING + r"\s*:\s*" + _JS_STRING)
JS_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")


def _js_unescape(text: str) -> str:
    simple = {"n": "\n", "t": "\t"}
    return JS_ESCAPE.sub(lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "u" and len(m.group(1)) == 5
                         else simple.get(m.group(1), m.group(1)), text)


_view_words: dict | None = None


def view_words() -> list[tuple[re.Pattern, str]]:
    """The views' own Chinese texts (llmlab/visualization/assets/zh.js, English -> Chinese, {name} fields), as
    patterns for the text a view writes into the page before its script runs (what a reader without
    scripts, or a text extraction, sees)."""
    global _view_words
    if _view_words is None:
        from llmlab.visualization import html as views_html

        source = (path.join(path.dirname(views_html.__file__), "assets", "zh.js"))
        with open(source, encoding="utf-8") as f:
            pairs = [(_js_unescape(a), _js_unescape(b)) for a, b in ZH_ENTRY.findall(f.read())]
        entries = []
        for english, chinese in sorted(pairs, key=lambda p: -len(p[0])):
            if len(english) < 4 or not re.search(r"[A-Za-z]{2,}", english):
                continue
            pattern = re.escape(html_lib.escape(english, quote=False))
            pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^<]+?)", pattern)
            try:
                entries.append((re.compile(f"(?<=>){pattern}(?=<)"), chinese))
            except re.error:
                continue
        _view_words = entries
    return _view_words


SAMPLING_READOUT = re.compile(r"(?<=>)(?P<prompt>(?:&quot;|\")[^<]*?(?:&quot;|\")) → next token "
                              r"\((?P<kept>[\d,]+) of (?P<vocab>[\d,]+) tokens can be drawn\)(?=<)")


# the writing box's note (its code tag splits it for the dictionary's text-by-text lookup)
WRITE_NOTE = ("In the built book, this box lets SmolLM2-135M write in your browser. "
              "In Python, use <code>llmlab.generate</code>.")
WRITE_NOTE_ZH = "在网页版的书中，这个框让 SmolLM2-135M 在你的浏览器里生成文本；在 Python 中请用 <code>llmlab.generate</code>。"


def translate_view_html(text: str) -> str:
    """A view's HTML with each text between tags that the views' dictionary lists in Chinese (scripts untouched)."""
    parts = re.split(r"(<script\b.*?</script>)", text, flags=re.S)
    for i in range(0, len(parts), 2):
        # the sampling view's readout as the page writes it (its script writes it on two lines instead)
        parts[i] = parts[i].replace(WRITE_NOTE, WRITE_NOTE_ZH)
        parts[i] = SAMPLING_READOUT.sub(lambda m: f"{m['prompt']} → 下一个词元（{m['vocab']} 个词元中有 {m['kept']} 个可能被抽中）",
                                        parts[i])
        for pattern, chinese in view_words():
            parts[i] = pattern.sub(lambda m: html_lib.escape(
                re.sub(r"\{(\w+)\}", lambda f: html_lib.unescape(m.groupdict().get(f.group(1), f.group(0))), chinese),
                quote=False), parts[i])
    return "".join(parts)


class ExerciseTitlesInSolutions(SphinxPostTransform):
    """A solution's title repeats its exercise's title, "Solution to Exercise 1.2 (Count an ...)", which
    sphinx-exercise writes from the English title it stored when the page was read: put the page's
    translation in place there too. Runs after sphinx-exercise resolves those titles (priority 21)."""
    default_priority = 900

    def run(self, **kwargs):
        language = _language(self.app)
        if language == "en":
            return
        from sphinx_exercise.nodes import solution_node, solution_start_node

        catalog, has_catalog = page_catalog(self.env)
        if not has_catalog:
            return
        solutions = [n for n in self.document.findall(nodes.Element) if isinstance(n, (solution_node, solution_start_node))]
        for title in [t for n in solutions for t in n.children[:1] if isinstance(t, nodes.title)]:
            for text in list(title.findall(nodes.Text)):
                new = catalog.gettext(str(text)) if str(text).strip() else str(text)      # " (", title, ")"
                new = PARENTHESIS.sub(lambda m: "(" + catalog.gettext(m.group(1)) + ")", new)
                if new != str(text):
                    text.parent.replace(text, nodes.Text(new))


TABLE_TEXT = re.compile(r">([^<>]*[A-Za-z]{2,}[^<>]*)<")     # the text between a table's tags
HTML_TEXT = re.compile(r">([^<>]*[A-Za-z]{2,}[^<>]*)<")
PARENTHESIS = re.compile(r"\(([^()]+)\)")


PLOT_NAME = re.compile(r"^[0-9a-f]{64}\.png$")     # MyST-NB names an output image by the hash of its bytes


class ChineseFigures(SphinxTransform):
    """On a Chinese page, each figure the page's code drew is shown with Chinese words: the build kept
    every shown figure (_build/figure_copies, named by the hash of the English image, which is also the
    image file's name) and drew it again with the figure catalog (scripts/book_i18n.py,
    llmlab/visualization/figure_language.py). Same execution, same numbers; English pages are untouched."""
    default_priority = 400

    def apply(self, **kwargs):
        language = _language(self.app)
        if language == "en":
            return
        for node in self.document.findall(nodes.image):
            name = path.basename(node.get("uri", ""))
            if PLOT_NAME.match(name):
                drawing = f"_build/figure_copies/{name[:-4]}.{language}.png"
                if path.exists(path.join(self.env.srcdir, drawing)):
                    node["uri"] = "/" + drawing
                    node.attributes.pop("candidates", None)


VIEW_TEXT = re.compile(r'("(?:title|legend)": )("(?:[^"\\]|\\.)*")')


def translate_views(app, exception):
    """On the Chinese site, the titles and legends that a page's code gives its views, from the
    page's catalog (scripts/book_i18n.py puts them there). They are data inside the view's JSON, so
    they are replaced in the written page."""
    import json

    from babel.messages.pofile import read_po

    if exception is not None or app.builder.format != "html" or _language(app) == "en":
        return
    out = path.normpath(app.outdir)
    for docname in app.env.found_docs:
        page = path.join(out, docname + ".html")
        po = path.join(app.srcdir, app.config.locale_dirs[0], app.config.language, "LC_MESSAGES", docname + ".po")
        if not (path.exists(page) and path.exists(po)):
            continue
        with open(po, "rb") as f:
            table = {m.id: m.string for m in read_po(f, locale=app.config.language)
                     if m.id and m.string and not m.fuzzy}
        with open(page, encoding="utf-8") as f:
            text = f.read()

        def swap(match):
            english = json.loads(match.group(2))
            return match.group(1) + json.dumps(table[english]) if english in table else match.group(0)
        translated = VIEW_TEXT.sub(swap, text)
        if translated != text:
            with open(page, "w", encoding="utf-8") as f:
                f.write(translated)


COLAB_PATH = re.compile(r"(/blob/[^/]+/)(chapters|practise)/")
COLAB_TEXT = {"Colab: read": ("Colab：阅读", "在 Colab 中打开整章（含参考答案）"),
              "Colab: practise": ("Colab：练习", "在 Colab 中打开练习本（已去掉参考答案）")}


def chinese_colab_buttons(app, pagename, templatename, context, doctree):
    """On a Chinese page, the Colab buttons open the Chinese notebooks (zh/chapters/, zh/practise/,
    written by scripts/make_zh_notebooks.py)."""
    if _language(app) == "en":
        return
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group["buttons"]:
            if "url" in button:
                button["url"] = COLAB_PATH.sub(r"\1zh/\2/", button["url"])
            if button.get("text") in COLAB_TEXT:
                button["text"], button["tooltip"] = COLAB_TEXT[button["text"]]


VIEWS_ZH = "llmlab-views-zh.js"


def add_views_chinese(app):
    """The views' Chinese texts (llmlab/visualization/assets/zh.js), once per Chinese page, in its head
    (before the views draw themselves); notebook outputs do not carry them."""
    if _language(app) != "en" and app.builder.format == "html":
        app.add_js_file(VIEWS_ZH)


def copy_views_chinese(app, exception):
    if exception is not None or app.builder.format != "html" or _language(app) == "en":
        return
    from llmlab.visualization.html import read_asset

    static = path.join(app.outdir, "_static")
    with open(path.join(static, VIEWS_ZH), "w", encoding="utf-8") as f:
        f.write(read_asset("zh.js"))


class _SeenTerms(set):
    """The Latin words the Chinese search has split so far, as a set: `extend` is how Sphinx adds to it."""

    def extend(self, terms) -> None:
        self.update(terms)


def fast_chinese_search() -> None:
    """Sphinx's Chinese search (sphinx.search.zh, 7.x) keeps every Latin word of the site in one list and
    asks `word in list` for each word it stems: time grows with the square of the site's length (95 % of
    the Chinese build, 60 s of it). A set answers the same question at once; the index is the same."""
    from sphinx.search import zh

    if isinstance(getattr(zh.SearchChinese, "latin_terms", None), list):
        zh.SearchChinese.latin_terms = _SeenTerms(zh.SearchChinese.latin_terms)


def setup(app):
    fast_chinese_search()
    app.connect("builder-inited", add_views_chinese)
    app.connect("build-finished", copy_views_chinese)
    from myst_nb import sphinx_
    from myst_nb.ext.glue import directives, roles, utils

    for module in (roles, directives):
        module.retrieve_glue_data = _glue_from_the_page(utils.retrieve_glue_data)
    sphinx_.Parser.parse = _keep_the_notebook(sphinx_.Parser.parse)
    app.add_transform(TranslateToctreeCaptions)
    app.add_transform(ExerciseTitles)
    app.add_transform(Diagrams)
    app.add_transform(ChineseFigures)
    app.add_transform(ChineseCode)
    app.add_post_transform(ExerciseTitlesInSolutions)
    app.connect("html-page-context", add_language_switch)
    app.connect("build-finished", translate_views)
    app.connect("html-page-context", chinese_colab_buttons, priority=503)   # after llmlab_site (502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
