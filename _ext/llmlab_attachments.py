"""Images carried by the notebooks themselves: `![alt](attachment:NAME.svg)` in a markdown cell.

A chapter's diagrams travel inside its notebook as markdown-cell attachments (written by
scripts/sync_notebooks.py from figures/generated/), so that a notebook opened alone, in Colab or
Jupyter, shows them. MyST-NB does not read cell attachments: this extension replaces each
`attachment:` image of a notebook page by a data: URI holding the attachment's bytes, before
Sphinx collects the page's images. An attachment that the notebook does not hold is a build warning.
"""
import json
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)
PREFIX = "attachment:"


def notebook_attachments(path) -> dict:
    """{name: {mime type: base64 data}} of every markdown cell of the notebook at `path`."""
    found = {}
    for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
        found.update(cell.get("attachments") or {})
    return found


def resolve_attachments(app, doctree):
    images = [node for node in doctree.findall(nodes.image) if node.get("uri", "").startswith(PREFIX)]
    if not images:
        return
    path = Path(app.env.doc2path(app.env.docname))
    attachments = notebook_attachments(path) if str(path).endswith(".ipynb") else {}
    for node in images:
        name = node["uri"][len(PREFIX):]
        bundle = attachments.get(name)
        if not bundle:
            logger.warning(f"{name}: no such attachment in {path} (run scripts/sync_notebooks.py)",
                           location=node)
            continue
        mime, data = next(iter(bundle.items()))
        node["uri"] = f"data:{mime};base64,{''.join(data) if isinstance(data, list) else data}"


def setup(app):
    # before Sphinx's image collector (priority 500) reads the URIs
    app.connect("doctree-read", resolve_attachments, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
