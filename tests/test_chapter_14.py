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


def test_the_diagram_draws_the_measured_angles():
    """Figure 14.1 draws, at each depth, the two senses at the angle whose cosine is the lesson's measured
    mean (the lesson asserts CROSS_SENSE_COSINE against its measurement); equal axes, so angles are true."""
    import math
    import sys

    import matplotlib

    matplotlib.use("Agg")
    sys.path.insert(0, str(ROOT / "figures"))
    from script_loader import load_file

    figure = load_file(ROOT / "figures" / "ch14_one_word_many_vectors.py", "figure_ch14_angles")
    assert max(figure.CROSS_SENSE_COSINE) == 30 and figure.CROSS_SENSE_COSINE[0] == 1.0   # embedding .. last depth
    fig = figure.draw("en")
    ax = fig.axes[0]
    assert ax.get_aspect() == 1.0
    arrows = [(a.xyann, a.xy) for a in ax.texts if hasattr(a, "xyann")]
    by_start = {}
    for (x0, y0), (x1, y1) in arrows:
        by_start.setdefault(round(x0, 6), []).append(math.atan2(y1 - y0, x1 - x0))
    drawn = [abs(angles[0] - angles[1]) if len(angles) == 2 else 0.0 for _, angles in sorted(by_start.items())]
    measured = [math.acos(c) for c in figure.CROSS_SENSE_COSINE.values()]
    assert len(drawn) == len(measured)
    for d, m in zip(drawn, measured):
        assert abs(d - m) < 1e-9, (math.degrees(d), math.degrees(m))
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_lesson_and_lab_name_both_separation_criteria():
    lesson = "\n".join(cells("markdown"))
    lab_prose = "\n".join(cells("markdown", page=LAB))
    lab_code = "\n".join(cells("code", page=LAB))
    assert "0.85" in lesson and "0.75" in lesson                 # the lesson names its test and the lab's
    assert "0.85" in lab_prose and "{glue:text}`lesson_first_s_en`" in lab_prose
    assert 'lesson_first < sep["SmolLM2-135M", "en"]' in lab_code  # "met later": pinned in the lab
