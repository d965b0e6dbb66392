"""The book's math, written into the pages as MathML when the book is built.

Browsers draw MathML themselves (Chromium since 109, Firefox and Safari long before), so a page
with formulas needs no MathJax: that was 1.1 MiB of script, plus its fonts, on every chapter page,
and the formulas appeared only after it had run. The LaTeX is converted by ``latex2mathml``; a
formula it cannot convert, or that still holds an unknown ``\\command``, is a build warning (an
error under ``-W``) that quotes the LaTeX, so no formula is ever shown half-converted.
"""
from __future__ import annotations

import re

from docutils import nodes
from sphinx.util import logging
from sphinx.util.math import get_node_equation_number

logger = logging.getLogger(__name__)

# MathML Core has no named spaces ("thinmathspace"...); browsers ignore them. Give their widths.
NAMED_SPACES = {"veryverythinmathspace": "0.0556em", "verythinmathspace": "0.1111em",
                "thinmathspace": "0.1667em", "mediummathspace": "0.2222em",
                "thickmathspace": "0.2778em", "verythickmathspace": "0.3333em",
                "veryverythickmathspace": "0.3889em"}
NAMED_SPACE = re.compile(r'="(negative)?(' + "|".join(NAMED_SPACES) + r')"')
UNKNOWN_COMMAND = re.compile(r">(\\[A-Za-z]+)<")
# latex2mathml writes \operatorname{softmax} as an operator (<mo>), which browsers pad on both sides
# like a "+"; a named function is an identifier (<mi>), as in "sin".
WORD_OPERATOR = re.compile(r"<mo>([A-Za-z]{2,})</mo>")
SPLIT = re.compile(r"^\s*\\begin\{split\}(.*)\\end\{split\}\s*$", re.S)


def _space(match: re.Match) -> str:
    width = NAMED_SPACES[match.group(2)]
    return f'="-{width}"' if match.group(1) else f'="{width}"'


def to_mathml(latex: str, display: str, where: str = "") -> str:
    """MathML for one formula; `display` is "inline" or "block"."""
    from latex2mathml.converter import convert

    source = latex.strip()
    inner = SPLIT.match(source)              # MyST wraps multi-line display math in split
    if inner and "\\begin{" in inner.group(1):
        source = inner.group(1).strip()
    # aligned is align* inside a display: latex2mathml knows the latter
    source = source.replace("\\begin{aligned}", "\\begin{align*}").replace("\\end{aligned}", "\\end{align*}")
    try:
        mathml = convert(source, display=display)
    except Exception as error:  # latex2mathml raises its own exception types
        logger.warning(f"cannot convert this formula to MathML ({error!r}): {latex!r}", location=where)
        return f'<code class="math-source">{nodes.Text(latex).astext()}</code>'
    unknown = UNKNOWN_COMMAND.findall(mathml)
    if unknown:
        logger.warning(f"unknown LaTeX command(s) {sorted(set(unknown))} in formula {latex!r}: "
                       "rewrite it with commands latex2mathml knows", location=where)
    return WORD_OPERATOR.sub(r"<mi>\1</mi>", NAMED_SPACE.sub(_space, mathml))


def visit_math(self, node):
    self.body.append(self.starttag(node, "span", "", CLASS="math notranslate nohighlight"))
    self.body.append(to_mathml(node.astext(), "inline", node))
    self.body.append("</span>")
    raise nodes.SkipNode


def visit_displaymath(self, node):
    latex = node.astext()
    parts = [part for part in latex.split("\n\n") if part.strip()]
    if len(parts) > 1 and not node.get("nowrap"):
        latex = "\\begin{align*}" + "\\\\".join(parts) + "\\end{align*}"
    self.body.append(self.starttag(node, "div", CLASS="math notranslate nohighlight"))
    if node.get("number"):
        number = get_node_equation_number(self, node)
        self.body.append(f'<span class="eqno">({number})')
        self.add_permalink_ref(node, "Link to this equation")
        self.body.append("</span>")
    self.body.append(to_mathml(latex, "block", node))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def setup(app):
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_displaymath, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
