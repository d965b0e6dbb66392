"""Sphinx tweaks for the book's offline HTML.

- Jupyter Book always loads sphinx-thebe, which declares its configuration script twice (a
  JavaScript SyntaxError on every page) and names a CDN; the book does not use thebe, so its
  scripts are dropped from every page.
- assets/llmlab-book.css (copied into _static/ with the vendored files) is added to every page.
- Glossary links: on each chapter's lesson and lab, every term that page teaches (the terms of
  glossary/chNN.yml whose `taught_in` names it) links once to the term's entry in the glossary
  appendix: where the page defines it in bold, else at its first use in the text. The links are
  made here, at build time, so the notebooks stay plain; they are ordinary Sphinx term references,
  so a term missing from the glossary is a build warning (and -W makes it an error).
"""
import importlib.util
import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY_DOC = "chapters/appendix_glossary"
CHAPTER_DOC = re.compile(r"(?:^|/)(\d\d[a-z]?)_[^/]*$")
# text inside these is never linked: code, math, headings, links, notebook cells' code and outputs
SKIP_NODES = (nodes.literal, nodes.literal_block, nodes.title, nodes.reference, nodes.raw, nodes.math,
              nodes.math_block, nodes.FixedTextElement, nodes.term, addnodes.pending_xref, nodes.rubric,
              nodes.caption, nodes.field_name)
SKIP_CLASSES = {"cell_input", "cell_output", "output", "admonition-title"}


def drop_thebe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    kept = [script for script in scripts
            if "thebe" not in str(script) and "thebe" not in str(getattr(script, "attributes", {}).get("body", ""))]
    context["script_files"] = kept


def _glossary_module():
    path = ROOT / "scripts" / "make_glossary.py"
    spec = importlib.util.spec_from_file_location("llmlab_make_glossary", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _chapter_terms(app) -> dict:
    """(chapter number, "lesson" or "lab") -> [(entry name, glossary term, in-text forms)], longest names first."""
    if not hasattr(app, "_llmlab_terms"):
        terms = {}
        if (ROOT / "glossary").is_dir():
            terms = _glossary_module().chapter_terms(ROOT)
        app._llmlab_terms = {n: sorted(entries, key=lambda e: -len(e[0])) for n, entries in terms.items()}
    return app._llmlab_terms


def _linkable(node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, SKIP_NODES) or SKIP_CLASSES & set(parent.get("classes", [])):
            return False
        parent = parent.parent
    return True


def _forms(name: str) -> list:
    """The ways prose writes a glossary name: "recurrent neural network (RNN)" -> the name without
    the parenthesis and the acronym; "SwiGLU / GeGLU" -> each side.

    >>> _forms("recurrent neural network (RNN)")
    ['recurrent neural network', 'RNN']
    """
    core = re.sub(r"\s*\([^)]*\)", "", name).strip()
    forms = [part.strip() for part in core.split(" / ") if part.strip()]
    forms += [a for a in re.findall(r"\(([^)]*)\)", name) if re.fullmatch(r"[A-Z][A-Za-z0-9-]*[A-Z0-9]", a)]
    return forms


def _plural(word: str) -> str:
    """A regex for a word and its plural: memory|memories, matrix|matrices, head|heads."""
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "(?:y|ies)"
    if word.endswith("ix"):
        return word[:-2] + "(?:ix|ices)"
    return word + "(?:s|es)?"


def _pattern(name: str, extra=()):
    """The name as it appears in prose: any case, hyphen or space between words, -ize or -ise,
    singular or plural; `extra` adds the entry's own in-text forms."""
    alternatives = []
    for form in _forms(name) + list(extra):
        words = [re.escape(w).replace("iz", "i[sz]") for w in re.split(r"[\s-]+", form)]
        words[-1] = _plural(words[-1])
        alternatives.append(r"[\s-]+".join(words))
    return re.compile(rf"(?<![\w-])((?:{'|'.join(alternatives)}))(?![\w-])", re.IGNORECASE)


def _rank(text) -> int:
    """Where a use of a term is best linked: where the chapter defines it in bold (0), else its first use
    in the body (1), else in a box such as the learning goals at the top (2)."""
    in_box = False
    parent = text.parent
    while parent is not None:
        if isinstance(parent, (nodes.Admonition, nodes.sidebar, nodes.topic)):
            in_box = True
        parent = parent.parent
    if in_box:
        return 2
    return 0 if isinstance(text.parent, nodes.strong) else 1


def link_glossary_terms(app, doctree):
    """Link one use of each term a chapter introduces to its glossary entry: where the chapter defines
    it in bold, else its first use in the body, else its first use in a box."""
    docname = app.env.docname
    match = CHAPTER_DOC.search(docname)
    if not match or GLOSSARY_DOC not in app.env.found_docs:
        return
    number = match.group(1)
    page = (int(number) if number.isdigit() else number.lstrip("0"), "lab" if docname.endswith("_lab") else "lesson")
    for name, term, forms in _chapter_terms(app).get(page, []):
        pattern = _pattern(name, forms)
        best = None
        for text in doctree.findall(nodes.Text):
            if not isinstance(text.parent, (nodes.paragraph, nodes.emphasis, nodes.strong)):
                continue
            found = pattern.search(text.astext())
            if not found or not _linkable(text):
                continue
            rank = _rank(text)
            if best is None or rank < best[0]:
                best = (rank, text, found)
            if rank == 0:
                break
        if best is None:
            continue
        _, text, found = best
        source = text.astext()
        ref = addnodes.pending_xref("", refdomain="std", reftype="term", reftarget=term.lower(),
                                    refexplicit=True, refwarn=True, refdoc=docname)
        ref += nodes.inline(found.group(1), found.group(1), classes=["xref", "std", "std-term", "llmlab-term"])
        parent = text.parent
        index = parent.index(text)
        pieces = [nodes.Text(source[:found.start()]), ref, nodes.Text(source[found.end():])]
        parent.remove(text)
        for offset, piece in enumerate(p for p in pieces if not isinstance(p, nodes.Text) or p.astext()):
            parent.insert(index + offset, piece)


VIEWS_JS, VIEWS_CSS = "llmlab-views.js", "llmlab-views.css"


def copy_views(app, exception):
    """Write the views' scripts and styles (llmlab.visualization.html.book_assets) into _static: every
    page loads them once, and each view on it carries only its data."""
    if exception is not None or app.builder.format != "html":
        return
    from llmlab.visualization.html import book_assets

    script, style = book_assets()
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    (static / VIEWS_JS).write_text(script, encoding="utf-8")
    (static / VIEWS_CSS).write_text(style, encoding="utf-8")


def setup(app):
    app.connect("html-page-context", drop_thebe_scripts)
    app.add_js_file(VIEWS_JS)                 # the views' code, once per page (before the views draw)
    app.add_css_file(VIEWS_CSS)
    app.connect("build-finished", copy_views)
    app.connect("doctree-read", link_glossary_terms)
    app.add_css_file("llmlab-book.css")
    app.add_js_file("llmlab-figures.js")      # a tap opens a figure full size; a default colour mode
    return {"parallel_read_safe": True, "parallel_write_safe": True}
