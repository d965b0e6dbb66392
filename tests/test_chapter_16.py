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


def lab_function(name, **namespace):
    """The lab's function `name`, defined here on its own; `namespace` gives it the names it uses (torch...)."""
    for source in cells(LAB, "code"):
        if "%pip" in source:                                      # the Colab setup cell is IPython, not Python
            continue
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                namespace = dict(namespace)
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
    assert "torch.stack([0 * g_vector, g_vector, g_forest] + g_random)" in code   # no push, sea, forest, random
    assert 'g_ratio = {"sea": (g_p[1] / g_base).log(), "forest": (g_p[2] / g_base).log()}' in code
    # each control's own value is in the text, next to SmolLM2's, with where the models agree and differ
    for name in ["g_sea_ratio", "g_sea_ratio_lo", "g_rand_div", "g_rand_div_min", "g_forest_ratio",
                 "rand_ratio_1_mean", "g_v_frac", "s_v_frac", "g_v_rest", "s_v_rest", "g_held", "s_held"]:
        assert "{glue:text}`" + name in lab, name
    assert "Where the two models **agree**" in lab and "Where they **differ**" in lab


def test_forty_random_directions_and_the_sea_direction_s_percentile():
    code = "\n".join(cells(LAB, "code"))
    lab = prose(LAB)
    assert "N_RANDOM = 40" in code and "torch.randn(N_RANDOM, vector.shape[0], generator=g)" in code
    assert "RANDOM if s == 1.0 else RANDOM[:5]" in code                       # all of them at scale 1
    assert "assert (random_means[1.0] < sea_ci[1.0][1]).all()" in code         # above every one of them
    for name in ["sea_pct:.0f", "n_random", "rand_ratio_1_median", "rand_ratio_1_max", "rand_up_1"]:
        assert "{glue:text}`" + name in lab, name
    assert "averaged over the five random vectors" not in lab and "the best of the five" not in lab


def test_the_later_blocks_alone_give_what_the_steer_hook_gives():
    """The lab's shortcut (the blocks up to the push run once, the later ones per push) against `steer` on the
    whole model, on tiny random models of both families the lab uses (Gemma's sliding layers included)."""
    import torch

    import llmlab
    from llmlab.config import ModelConfig
    from llmlab.inspection import capture, hook_name, steer

    pushed = lab_function("p_words_pushed", torch=torch)
    stream_after = lab_function("stream_after", torch=torch, capture=capture, hook_name=hook_name)

    class Batch:                                                   # the one tokenizer method stream_after uses
        def __init__(self, ids, mask):
            self.ids, self.mask = ids, mask

        def encode_batch(self, prompts):
            return self.ids, self.mask

    for preset in ["tiny-llama", "tiny-gemma3"]:
        torch.manual_seed(0)
        model = llmlab.Transformer(ModelConfig.preset(preset)).eval()
        ids = torch.randint(0, 128, (3, 7))
        mask = torch.ones(3, 7, dtype=torch.long)
        mask[1, :2] = mask[2, :4] = 0                              # left padding, as encode_batch gives
        words, layer = [3, 17, 40], 0
        directions = torch.randn(3, 32)
        stream, bool_mask = stream_after((model, Batch(ids, mask)), None, layer)
        fast = pushed(model, stream, bool_mask, words, layer, 1.5 * directions, chunk=2)   # (3 pushes, 3 rows)
        for k in range(3):
            with torch.no_grad(), steer(model, directions[k], layer, 1.5):
                logits = model(ids, attention_mask=mask, logits_to_keep=1)[:, -1].float()
            slow = torch.softmax(logits, dim=-1)[:, words].sum(-1)
            assert_same_up_to_rounding(fast[k].log(), slow.log(), scale=logits.abs().max().item(),
                                       depth=llmlab.forward_depth(model.config, 7))


def test_gemma_s_massive_channels_are_found_and_left_out():
    import torch

    massive = lab_function("massive_channels", torch=torch)
    torch.manual_seed(0)
    stream = torch.randn(2, 5, 64)
    stream[..., 7] += 300.0                                        # one channel far above the others
    mask = torch.tensor([[False, True, True, True, True], [True, True, True, True, True]])
    h, prompt_of, big = massive(stream, mask)
    assert h.shape == (7, 64)                                      # 4 + 5 real positions, each prompt's first left out
    assert prompt_of.tolist() == [0, 0, 0, 1, 1, 1, 1]
    assert big.nonzero().flatten().tolist() == [7]
    lab = prose(LAB)
    assert "{glue:text}`g_v_rest:.2f`" in lab and "{glue:text}`g_random_on_massive:.1f`%" in lab


def test_the_heads_are_also_patched_together():
    code = "\n".join(cells(LAB, "code"))
    lab = prose(LAB)
    assert "SIZES = [1, 2, 5, 10, 20, 50, 100, 200, n_layers * n_heads]" in code
    # all heads at the last position give back the clean logits, up to float32 rounding
    assert "llmlab.assert_same_up_to_rounding(sets_logits[-1, -1], clean_logits[0, -1]" in code
    for name in ["hp_joint5:.0f", "hp_top5_sum:.0f", "hp_joint_all:.3f", "hp_joint20:.0f", "hp_tail_sum:+.0f"]:
        assert "{glue:text}`" + name in lab, name
    assert "most of the difference lies elsewhere" not in lab
