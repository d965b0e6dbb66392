"""Two ways to open a chapter from the launch menu: "Colab: read" (the chapter with its solutions)
and "Colab: practise" (practise/<chapter>.ipynb, the student copy written by scripts/make_practise.py).

The theme builds the menu (priority 501); this handler runs after it and edits the menu's entries.
"""
from pathlib import Path


def add_practise_link(app, pagename, templatename, context, doctree):
    if not pagename.startswith("chapters/"):
        return
    name = pagename.split("/", 1)[1] + ".ipynb"
    practise = Path(app.srcdir) / "practise" / name
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        buttons = group["buttons"]
        for i, button in enumerate(list(buttons)):
            if button.get("text") != "Colab":
                continue
            button["text"] = "Colab: read"
            button["tooltip"] = "Open the whole chapter, solutions included, in Colab"
            if practise.exists():
                buttons.insert(i + 1, dict(button, text="Colab: practise",
                                           tooltip="Open the practise copy (solutions removed) in Colab",
                                           url=button["url"].replace(f"/chapters/{name}", f"/practise/{name}")))
            break


def setup(app):
    app.connect("html-page-context", add_practise_link, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
