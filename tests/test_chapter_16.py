"""Chapter 16 (steering and Patchscopes): the rules its lesson and lab keep, read from the notebooks
without running them (the book build runs them and their hidden asserts), and the lab's own small
helpers run here."""
import ast
import json
import re
from pathlib import Path

import pytest

from llmlab import assert_same_up_to_rounding

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "chapters" / "16_steering_and_patchscopes.ipynb"
LAB = ROOT / "chapters" / "16_steering_and_patchscopes_lab.ipynb"


def cells(page, kind=None):
    return ["".join(c["source"]) for c in json.loads(page.read_text(encoding="utf-8"))["cells"]
            if kind is None or c["cell_type"] == kind]


def prose(page):
    return re.sub(r"\(data:image[^)]*\)", "", "\n".join(cells(page, "markdown")))


def lab_function(name):
    for source in cells(LAB, "code"):
        if "%pip" in source:                                      # the Colab setup cell is IPython, not Python
            continue
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                namespace = {}
                exec(compile(ast.Module([node], []), str(LAB), "exec"), namespace)
                return namespace[name]
    raise AssertionError(f"the lab defines no function {name}")


@pytest.mark.parametrize("page", [LESSON, LAB], ids=["lesson", "lab"])
def test_every_name_the_prose_quotes_is_glued(page):
    quoted = set(re.findall(r"\{glue:text\}`([A-Za-z0-9_]+)", prose(page)))
    code = "\n".join(cells(page, "code"))
    glued = set(re.findall(r"glue\(\s*\"([A-Za-z0-9_]+)\"", code))
    for stem, ends in re.findall(r"glue\(\s*f\"([a-z_]+)\{(\w+)\}", code):   # names glued in a loop
        glued |= {name for name in quoted if name.startswith(stem)}
    assert quoted - glued == set()


def test_the_lesson_is_the_newcomer_s_path_and_points_to_the_lab():
    lesson = prose(LESSON)
    assert "{doc}`Lab 16 <16_steering_and_patchscopes_lab>`" in lesson
    own = "\n\n".join(p for p in lesson.split("\n\n") if "_lab>`" not in p)   # the pointers to the lab left out
    for term in ["95%", "interval", "mean_ci", "bootstrap"]:
        assert term not in own, term
    assert len(lesson.split()) < 2600
    assert "```{exercise} Activation patching of one head" in lesson    # the exercise stays with its check


def test_the_lab_patches_every_head_and_compares_with_attribution():
    lab = prose(LAB)
    code = "\n".join(cells(LAB, "code"))
    assert lab.startswith("# Lab 16: ") and "{doc}`appendix_evidence`" in lab
    assert "n_layers * n_heads" in code and "GrowingKVCache" in code          # all 270 heads, one batch
    # the expert's findings are pinned by hidden asserts that the build runs
    assert "assert best[0] != by_attribution[0] and patching[best[0]] > patching[by_attribution[0]]" in code
    assert "assert all(change[h] >= change.median() for h in controls)" in code   # controls whose output changes
    assert "hp_attr_rank" in lab and "hp_ctrl" in lab


def test_sea_words_are_counted_with_an_interval():
    lab = prose(LAB)
    assert "{glue:text}`count_sea_1`" in lab and "{glue:text}`count_0_hi:.0f`%" in lab
    wilson = lab_function("wilson")
    # against the interval's published values, written to 4 decimals: a tolerance for those written
    # digits (1e-3, twenty times their rounding), not for float rounding
    lo, hi = wilson(0, 48)
    assert lo == 0 and abs(hi - 0.0741) < 1e-3                 # no hits still leaves room up to 7%
    lo, hi = wilson(3, 48)
    assert abs(lo - 0.0215) < 1e-3 and abs(hi - 0.1682) < 1e-3
    lo, hi = wilson(48, 48)
    # all hits: the bound's numerator and denominator are the same number, a few float64 operations apart
    assert_same_up_to_rounding(hi, 1.0, depth=4)
    assert lo < 0.95


def test_the_lesson_shows_the_live_steering_view_where_the_reader_sees_it():
    """The steered lens view carries its direction (live_steer), so the built page gets the steering panel
    (common.js adds it under a lens view whose data has live.steer); the cell is neither folded nor removed."""
    nb = json.loads(LESSON.read_text(encoding="utf-8"))
    views = [c for c in nb["cells"] if c["cell_type"] == "code" and "LensView.from_lens(" in "".join(c["source"])]
    assert len(views) == 1
    source, tags = "".join(views[0]["source"]), views[0]["metadata"].get("tags", [])
    assert "live_steer=(vector, LAYER, 1.0)" in source and "with steer(model, vector, LAYER, 1.0)" in source
    assert not {"hide-cell", "hide-input", "hide-output", "remove-cell", "remove-output", "remove-input"} & set(tags)
    assert "LensView" not in "\n".join(cells(LAB, "code"))          # one steered lens view, the lesson's


def test_the_lab_repeats_the_central_measurement_on_gemma_with_its_controls():
    code = "\n".join(cells(LAB, "code"))
    lab = prose(LAB)
    assert code.count('llmlab.load("gemma3-270m")') == 1                       # Gemma loaded once
    assert "g_random_ratio = torch.stack([g_log_ratio(r) for r in g_random])" in code
    assert 'g_ratio = {"sea": g_log_ratio(g_vector), "forest": g_log_ratio(g_forest)}' in code
    # each control's own value is in the text, next to SmolLM2's, with where the models agree and differ
    for name in ["g_sea_ratio", "g_sea_ratio_lo", "g_rand_div", "g_rand_div_min", "g_forest_ratio",
                 "rand_ratio_1_mean", "g_v_frac", "s_v_frac"]:
        assert "{glue:text}`" + name in lab, name
    assert "Where the two models **agree**" in lab and "Where they **differ**" in lab
