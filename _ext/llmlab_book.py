"""Sphinx tweaks for the book's offline HTML.

- Jupyter Book always loads sphinx-thebe, which declares its configuration script twice (a
  JavaScript SyntaxError on every page) and names a CDN; the book does not use thebe, so its
  scripts are dropped from every page.
- assets/llmlab-book.css (copied into _static/ with the vendored files) is added to every page.
"""


def drop_thebe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    kept = [script for script in scripts
            if "thebe" not in str(script) and "thebe" not in str(getattr(script, "attributes", {}).get("body", ""))]
    context["script_files"] = kept


def setup(app):
    app.connect("html-page-context", drop_thebe_scripts)
    app.add_css_file("llmlab-book.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
