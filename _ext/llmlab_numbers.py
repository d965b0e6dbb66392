"""Numbers per chapter, as in a printed book: Exercise 5.1, Figure 5.2.

The table of contents is not `numbered` (the chapter titles carry their own numbers, and chapter 10b
sits between 10 and 11), so Sphinx alone counts figures and exercises through the whole book
(Exercise 18, 19, ...). This extension does two things:

- A diagram written in a page as a paragraph that holds one image with a description,
  `![what it shows](file "name.svg")`, becomes a figure whose caption is that description, labelled
  `fig-name` (so that {numref}`fig-name` can point to it). Plots printed by code cells stay as they are.
- Once Sphinx has numbered every figure, table, code block and exercise, each number becomes
  (chapter, n): the chapter is read from the file name (05_self_attention -> 5, 10b_... -> 10b,
  00_setup -> 0) and n counts in reading order through the lesson and then its lab, so that
  NN_name_lab continues the count of NN_name. Pages without a chapter number in their name (the front
  page, the appendices) count their own items: Figure 1, Figure 2, ...

Titles, captions, {numref} links and the "Solution to Exercise ..." titles of sphinx-exercise all read
these numbers (env.toc_fignumbers), so they agree with each other.
"""
import re

from docutils import nodes
from sphinx.transforms import SphinxTransform

CHAPTER_FILE = re.compile(r"(?:^|/)(\d+)([a-z]?)_[^/]*$")


def chapter_number(docname: str) -> str | None:
    """The chapter a page belongs to, from its file name: "5", "10b", "0"; None for other pages.

    >>> chapter_number("chapters/05_self_attention_lab"), chapter_number("chapters/10b_how_weights_are_stored")
    ('5', '10b')
    >>> chapter_number("chapters/appendix_notation") is None
    True
    """
    match = CHAPTER_FILE.search(docname)
    return None if match is None else str(int(match.group(1))) + match.group(2)


def _figure_name(image) -> str | None:
    """fig-ch05-mha-gqa-mqa for an image titled or stored as ch05_mha_gqa_mqa.svg."""
    for source in (image.get("title", ""), image.get("uri", "")):
        match = re.search(r"([\w-]+)\.(?:svg|png|jpe?g|gif)$", source.strip())
        if match and not source.startswith("data:"):
            return "fig-" + match.group(1).replace("_", "-").lower()
    return None


class DiagramsAsFigures(SphinxTransform):
    """A paragraph holding only an image with alt text becomes a captioned, numbered figure."""

    default_priority = 840    # before SphinxDomains (850) collects the labels

    def apply(self, **kwargs) -> None:
        for paragraph in list(self.document.findall(nodes.paragraph)):
            if len(paragraph.children) != 1 or not isinstance(paragraph[0], nodes.image):
                continue
            image = paragraph[0]
            description = image.get("alt", "").strip()
            if not description:
                continue
            paragraph.remove(image)
            figure = nodes.figure("", image, nodes.caption(description, description), classes=["llmlab-diagram"])
            figure.source, figure.line = paragraph.source, paragraph.line
            paragraph.replace_self(figure)
            name = _figure_name(image)
            labels = self.env.get_domain("std").labels      # the book's labels, from the pages read so far
            if name and name not in self.document.nameids and labels.get(name, (self.env.docname,))[0] == self.env.docname:
                figure["names"].append(name)
                self.document.note_explicit_target(figure, figure)
            elif name and name not in self.document.ids:   # the same diagram on a second page: an anchor only
                figure["ids"].append(name)
                self.document.ids[name] = figure
            else:
                self.document.set_id(figure)


def number_by_chapter(app, env) -> list:
    """Replace Sphinx's book-wide numbers by (chapter, n), counted through a lesson and then its lab."""
    pages = {}                                     # chapter (or the page itself) -> its pages, TOC order
    for docname in env.toc_fignumbers:
        pages.setdefault(chapter_number(docname) or docname, []).append(docname)
    for docnames in pages.values():
        prefix = chapter_number(docnames[0])
        counts = {}
        for docname in sorted(docnames, key=lambda d: d.endswith("_lab")):   # stable: the lesson first
            for figtype, numbers in env.toc_fignumbers[docname].items():
                for figure_id in numbers:
                    counts[figtype] = counts.get(figtype, 0) + 1
                    numbers[figure_id] = (prefix, counts[figtype]) if prefix else (counts[figtype],)
    return []          # Sphinx's own collector already marks every page whose numbers it reassigned


def figure_label(app, config) -> None:
    """"Figure 5.2" rather than Sphinx's English "Fig. 5.2"; other languages keep their own word."""
    if not config.language or config.language.startswith("en"):
        config.numfig_format["figure"] = "Figure %s"


def setup(app):
    app.connect("config-inited", figure_label, priority=900)   # after Sphinx fills in its defaults (800)
    app.add_transform(DiagramsAsFigures)
    app.connect("env-get-updated", number_by_chapter, priority=900)    # after TocTreeCollector (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
