"""Chapter 14 (contextual representations): rules its notebook keeps. The notebook is not executed
here (that is the book build); its cells are read."""
import json
import re

import pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "14_contextual_representations.ipynb"
LAB = ROOT / "chapters" / "14_contextual_representations_lab.ipynb"


def cells(kind=None, tagged=None, page=CHAPTER):
    out = []
    for cell in json.loads(page.read_text(encoding="utf-8"))["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if (kind is None or cell["cell_type"] == kind) and (tagged is None or tagged(tags)):
            out.append("".join(cell["source"]))
    return out


@pytest.mark.parametrize("page", [CHAPTER, LAB], ids=["lesson", "lab"])
def test_every_name_the_prose_quotes_is_glued(page):
    prose = "\n".join(cells("markdown", page=page))
    code = "\n".join(cells("code", page=page))
    quoted = set(re.findall(r"\{glue:text\}`([A-Za-z0-9_]+)", prose))
    glued = set(re.findall(r"glue\(\s*\"([A-Za-z0-9_]+)\"", code)) | set(re.findall(r"glue\(\s*f\"([a-z_]+)\{", code))
    # names glued in a loop as f"best_{tag}" with tag in s_en, s_zh, g_en, g_zh
    expanded = {f"{stem}{tag}" for stem in set(re.findall(r"glue\(\s*f\"([a-z_]+)\{tag\}", code))
                for tag in ["s_en", "s_zh", "g_en", "g_zh"]}
    expanded |= {f"best_{tag}_{end}" for tag in ["s_en", "s_zh", "g_en", "g_zh"] for end in ["depth", "ctrl"]}
    expanded |= {f"{stem}_{tag}" for stem in ["bag", "bag_control", "slot", "slot_control"]
                 for tag in ["s_en", "s_zh", "g_en", "g_zh"]}
    expanded |= {f"null_{m}_{end}" for m in "sg" for end in ["mean", "lo", "hi"]}
    assert quoted - glued - expanded == set()


def test_the_chapter_opens_with_the_ramp():
    prose = "\n".join(cells("markdown"))
    order = [prose.find(heading) for heading in
             ["## The idea in two minutes", "## By hand", "## On the real models", "## The headline"]]
    assert -1 not in order and order == sorted(order)
    first_code = prose.find("```python")
    assert first_code == -1 or first_code > order[1]       # no code before the toy


def test_the_lab_holds_the_evidence_and_the_lesson_none_of_it():
    lesson = "\n".join(cells("markdown"))
    lab = "\n".join(cells("markdown", page=LAB))
    assert lab.startswith("# Lab 14: ") and "{doc}`14_contextual_representations`" in lab and "{doc}`appendix_evidence`" in lab
    for baseline in ["bag of input embeddings", "slot word's own embedding", "random vectors", "control"]:
        assert baseline in lab.replace("**", ""), baseline
    before_exercises = re.sub(r"\(data:image[^)]*\)", "", lesson.split("```{exercise} Linear CKA")[0])
    for term in ["95%", "interval", "CKA", "Gram", "bootstrap", "KL"]:      # a lesson teaches none of these
        assert not re.search(rf"\b{re.escape(term)}", before_exercises), term
    assert "{doc}`Lab 14 <14_contextual_representations_lab>`" in lesson
    # the old conclusion ("not in the words; it is computed") is gone: the slot word alone reads the sense
    assert "it is computed" not in lab and "is largely **in the word**" in lab


def test_no_printed_library_source_and_no_visible_glue():
    visible = [c for c in cells("code", tagged=lambda t: not {"remove-cell", "hide-input", "hide-cell"} & set(t))]
    for source in visible:
        assert "show_source" not in source and "getsource" not in source
        assert "glue(" not in source


def test_the_exercises_count_the_sentences_they_use():
    prose = "\n".join(cells("markdown"))
    assert "eight English sentences" not in prose and "24 English sentences" not in prose
    assert "{glue:text}`n_en` English sentences" in prose
