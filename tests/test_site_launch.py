"""The launch menu's Colab entries (_ext/llmlab_site.py): a notebook page keeps them, a MyST text page loses them."""
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "_ext"))

import llmlab_site  # noqa: E402

COLAB = "https://colab.research.google.com/github/llmlab-book/llmlab/blob/main/chapters/"


def launch_menu(page_file: str) -> dict:
    """The context the theme hands over: a launch menu with its Colab button for that source file."""
    button = dict(type="link", text="Colab", tooltip="Launch on Colab", url=COLAB + page_file)
    return {"header_buttons": [dict(type="group", label="launch-buttons", buttons=[button]),
                               dict(type="group", label="download-buttons", buttons=[dict(text="Download")])]}


def test_a_myst_text_page_has_no_colab_button():
    context = launch_menu("appendix_instructor.md")
    llmlab_site.add_practise_link(SimpleNamespace(srcdir=str(ROOT)), "chapters/appendix_instructor", "page.html",
                                  context, None)
    assert [g["label"] for g in context["header_buttons"]] == ["download-buttons"]


def test_a_notebook_page_keeps_its_colab_button():
    notebook = sorted((ROOT / "chapters").glob("*.ipynb"))[0]
    context = launch_menu(notebook.name)
    llmlab_site.add_practise_link(SimpleNamespace(srcdir=str(ROOT)), f"chapters/{notebook.stem}", "page.html",
                                  context, None)
    buttons = context["header_buttons"][0]["buttons"]
    assert buttons[0]["text"] == "Colab: read" and buttons[0]["url"] == COLAB + notebook.name
