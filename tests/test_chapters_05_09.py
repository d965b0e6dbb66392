"""Chapters 5-9: rules their sources must keep, their figures, and the functions they define
inline checked against llmlab.

The notebooks are not executed here (that is the book build). Their cells are read; the functions
a chapter defines inline are compiled on their own and run on tiny random models.
"""
import ast
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import llmlab
from llmlab import assert_same_up_to_rounding, forward_depth
from llmlab.config import ModelConfig
from llmlab.exercises import check
from llmlab.numerics import largest_difference, rounding_tolerance

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = {n: next(p for p in sorted((ROOT / "chapters").glob(f"0{n}_*.ipynb")) if not p.stem.endswith("_lab"))
            for n in range(5, 10)}   # the lessons (NN_name_lab.ipynb is the lab beside each)
GLUED = re.compile(r"\{glue:text\}`([A-Za-z0-9_]+)(?::[^`]*)?`")
# ../figures/generated/NAME.svg, or the inline copy scripts/sync_notebooks.py writes (the name kept as its title)
FIGURE = re.compile(r'(?:\.\./figures/generated/|data:image/png;base64,[A-Za-z0-9+/=]+ ")([A-Za-z0-9_]+)\.svg')


def cell_sources(path, kind):
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == kind]


def glue_names(code: str) -> list[re.Pattern]:
    """Names passed to glue(...) in a code cell; an f-string name becomes a pattern ({x} -> any word)."""
    found = []
    for call in re.finditer(r"""glue\(\s*(f?)(["'])(.+?)\2""", code):
        is_f, name = call.group(1), call.group(3)
        found.append(re.compile(re.sub(r"\\\{[^}]*\\\}", r"\\w+", re.escape(name)) if is_f else re.escape(name)))
    if re.search(r"glue\(\s*[A-Za-z_]", code):   # glue(key, ...) in a loop: the keys are string literals of the cell
        found += [re.compile(re.escape(m.group(2))) for m in re.finditer(r"""(["'])([A-Za-z0-9_]+)\1""", code)]
    return found


def inline_functions(path, *names):
    """Compile the top-level functions `names` defined anywhere in the notebook's code cells."""
    namespace = {"torch": torch, "F": F, "math": __import__("math")}
    for source in cell_sources(path, "code"):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        defs = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names]
        if defs:
            exec(compile(ast.Module(body=defs, type_ignores=[]), str(path), "exec"), namespace)
    missing = [n for n in names if n not in namespace]
    assert not missing, f"{path.name} defines no {missing}"
    return [namespace[n] for n in names]


@pytest.mark.parametrize("n", sorted(CHAPTERS))
def test_every_glued_number_is_computed_in_the_chapter(n):
    path = CHAPTERS[n]
    patterns = [p for code in cell_sources(path, "code") for p in glue_names(code)]
    used = {key for text in cell_sources(path, "markdown") for key in GLUED.findall(text)}
    unknown = sorted(key for key in used if not any(p.fullmatch(key) for p in patterns))
    assert not unknown, f"{path.name}: prose pastes {unknown}, which no code cell glues"


@pytest.mark.parametrize("n", sorted(CHAPTERS))
def test_chapter_asserts_no_clock(n):
    code = "\n".join(cell_sources(CHAPTERS[n], "code"))
    assert not re.search(r"assert[^\n]*(perf_counter|time\.time|elapsed|seconds)", code)


@pytest.mark.parametrize("n", sorted(CHAPTERS))
def test_every_figure_a_chapter_shows_has_its_script(n):
    shown = {name for text in cell_sources(CHAPTERS[n], "markdown") for name in FIGURE.findall(text)}
    assert shown, f"chapter {n} shows no diagram"
    assert all((ROOT / "figures" / f"{name}.py").exists() for name in shown), shown


SCRIPTS = sorted(p.name for p in (ROOT / "figures").glob("ch0[5-9]_*.py"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_figure_script_writes_a_valid_svg(script, tmp_path):
    # Run from an empty folder: the script writes figures/generated/<name>.svg there, not in the repository.
    result = subprocess.run([sys.executable, str(ROOT / "figures" / script)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    svg = tmp_path / "figures" / "generated" / script.replace(".py", ".svg")
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg") and len(list(root.iter())) > 20


def test_chapter5_gqa_solution_passes_its_check():
    gqa_attention, = inline_functions(CHAPTERS[5], "gqa_attention")
    result = check("gqa_attention", gqa_attention, quiet=True)
    assert result.passed, result.message


def tiny_llama():
    torch.manual_seed(0)
    cfg = ModelConfig.preset("tiny-llama")
    model = llmlab.Transformer(cfg).eval()
    with torch.no_grad():          # norms away from 1, so that a forgotten norm weight shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.rand_like(p) + 0.5)
    return cfg, model


def test_chapter8_model_from_the_chapters_parts_matches_llmlab():
    """The chapter's assembled_model uses only its own functions and the raw state dict."""
    assembled_model, = inline_functions(CHAPTERS[8], "rms_norm", "rope_tables", "rotate", "attention", "swiglu",
                                        "assembled_model")[-1:]
    cfg, model = tiny_llama()
    ids = torch.randint(0, cfg.vocab_size, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        mine = assembled_model(ids, {k: v for k, v in model.state_dict().items()}, cfg)
        theirs = model(ids)
    # the same model written another way: equal up to float32 rounding over all of it
    assert_same_up_to_rounding(mine, theirs, depth=forward_depth(cfg, 7))


def test_chapter8_assembled_model_notices_a_wrong_part():
    """The comparison can fail: the same code with one wrong weight gives other logits."""
    assembled_model, = inline_functions(CHAPTERS[8], "rms_norm", "rope_tables", "rotate", "attention", "swiglu",
                                        "assembled_model")[-1:]
    cfg, model = tiny_llama()
    ids = torch.randint(0, cfg.vocab_size, (1, 6), generator=torch.Generator().manual_seed(2))
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    weights["blocks.1.mlp_norm.weight"] = torch.ones(cfg.d_model)
    with torch.no_grad():
        reference = model(ids)
        # a real difference: beyond what rounding over the whole model allows
        assert largest_difference(assembled_model(ids, weights, cfg), reference) > \
            rounding_tolerance(reference, forward_depth(cfg, 6))


def test_chapter8_llama_block_solution_passes_its_check():
    *_, llama_block = inline_functions(CHAPTERS[8], "rms_norm", "rope_tables", "rotate", "attention", "swiglu",
                                       "llama_block")
    result = check("llama_block", llama_block, quiet=True)
    assert result.passed, result.message


LAB8 = ROOT / "chapters" / "08_the_whole_stack_lab.ipynb"
GEMMA_PARTS = ("rms_norm", "rope_tables", "rotate", "gemma_attention", "geglu", "assembled_gemma")


def test_lab8_glues_every_number_its_prose_pastes():
    patterns = [p for code in cell_sources(LAB8, "code") for p in glue_names(code)]
    used = {key for text in cell_sources(LAB8, "markdown") for key in GLUED.findall(text)}
    unknown = sorted(key for key in used if not any(p.fullmatch(key) for p in patterns))
    assert not unknown, f"{LAB8.name}: prose pastes {unknown}, which no code cell glues"


def _function_sources(path, names):
    found = {}
    for source in cell_sources(path, "code"):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        found |= {node.name: ast.get_source_segment(source, node) for node in tree.body
                  if isinstance(node, ast.FunctionDef) and node.name in names}
    return found


def test_lab8_builds_gemma_on_the_lessons_parts_unchanged():
    """The lab's Gemma reuses the lesson's rms_norm, rope_tables and rotate: the same source, not a variant."""
    names = ("rms_norm", "rope_tables", "rotate")
    lab, lesson = _function_sources(LAB8, names), _function_sources(CHAPTERS[8], names)
    assert sorted(lab) == sorted(names) and lab == lesson


def tiny_gemma():
    torch.manual_seed(0)
    cfg = ModelConfig.preset("tiny-gemma3")      # window 4, two RoPE bases, QK-norm, sandwich, GeGLU, sqrt(d)
    model = llmlab.Transformer(cfg).eval()
    with torch.no_grad():   # Gemma's norms store w for (1 + w): draw them away from 0, so a forgotten norm shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.rand_like(p) - 0.5)
    return cfg, model


def test_lab8_gemma_from_the_chapters_parts_matches_llmlab():
    """The lab's assembled_gemma, on a tiny random Gemma and a text longer than its window."""
    assembled_gemma = inline_functions(LAB8, *GEMMA_PARTS)[-1]
    cfg, model = tiny_gemma()
    T = 11
    assert T > cfg.sliding_window and "full" in cfg.layer_types and "sliding" in cfg.layer_types
    ids = torch.randint(0, cfg.vocab_size, (2, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        weights = dict(model.state_dict())
        mine, last = assembled_gemma(ids, weights, cfg), assembled_gemma(ids, weights, cfg, logits_to_keep=1)
        theirs = model(ids)
    assert_same_up_to_rounding(mine, theirs, depth=forward_depth(cfg, T))
    assert_same_up_to_rounding(last, theirs[:, -1:], depth=forward_depth(cfg, T))


@pytest.mark.parametrize("wrong", ["no window", "one RoPE base", "post-attention norm", "post-FFN norm", "QK-norm"])
def test_lab8_assembled_gemma_notices_a_wrong_part(wrong):
    """The comparison can fail: each of Gemma's own parts, changed on the rebuild's side alone, changes its logits."""
    import dataclasses

    assembled_gemma = inline_functions(LAB8, *GEMMA_PARTS)[-1]
    cfg, model = tiny_gemma()
    T = 11
    ids = torch.randint(0, cfg.vocab_size, (1, T), generator=torch.Generator().manual_seed(2))
    weights, mine_cfg = {k: v.clone() for k, v in model.state_dict().items()}, cfg
    if wrong == "no window":
        mine_cfg = dataclasses.replace(cfg, sliding_window=T)
    elif wrong == "one RoPE base":
        mine_cfg = dataclasses.replace(cfg, rope_local_theta=cfg.rope_theta)
    else:
        name = {"post-attention norm": "blocks.0.post_attn_norm.weight", "post-FFN norm": "blocks.0.post_mlp_norm.weight",
                "QK-norm": "blocks.0.attn.k_norm.weight"}[wrong]
        weights[name] = torch.zeros_like(weights[name])
    with torch.no_grad():
        reference = model(ids)
        assert largest_difference(assembled_gemma(ids, weights, mine_cfg), reference) > \
            rounding_tolerance(reference, forward_depth(cfg, T))


def test_chapter6_direct_logit_attribution_sums_to_the_logit():
    """The decomposition the chapter uses, on a tiny model: embedding + every sublayer's share of one
    logit, through the final norm with its rms held fixed, adds up to the logit."""
    from llmlab.inspection import capture

    _, model = tiny_llama()
    ids = torch.randint(0, 128, (1, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logits, c = capture(model, None, ids, names=["hook_embed", "*hook_attn_out", "*hook_mlp_out"])
        parts = [c["hook_embed"][0, -1]] + [c[f"blocks.{l}.{h}"][0, -1] for l in range(2)
                                            for h in ("hook_attn_out", "hook_mlp_out")]
        final = sum(parts)
        rms = final.pow(2).mean().add(model.final_norm.eps).sqrt()
        for token in (0, 17, 99):
            direction = model.lm_head.weight[token] * model.final_norm.weight
            shares = [float(direction @ p / rms) for p in parts]
            # the same sum of parts (the forward adds them in this order), then the norm's mean and the
            # head's product of d_model terms each, against a dot product per part: up to rounding at the
            # size of the shares
            assert_same_up_to_rounding(sum(shares), logits[0, -1, token], depth=2 * model.config.d_model + len(parts),
                                       scale=sum(abs(s) for s in shares))


LAB7 = ROOT / "chapters" / "07_residuals_and_norms_lab.ipynb"


def lab7_toy():
    """The chapter 7 lab's toy networks: DeepMLP, train, stacked, train_arms, ARMS and RUNS, compiled without the
    cells that train them for the page."""
    namespace = {"torch": torch, "F": F}
    wanted = {"DeepMLP", "train", "stacked", "train_arms", "ARMS", "RUNS"}
    for source in cell_sources(LAB7, "code"):
        try:
            tree = ast.parse(source)
        except SyntaxError:       # the Colab setup cell (%pip)
            continue
        keep = [node for node in tree.body
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in wanted
                or isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id in wanted]
        if keep:
            exec(compile(ast.Module(body=keep, type_ignores=[]), str(LAB7), "exec"), namespace)
    missing = wanted - namespace.keys()
    assert not missing, f"{LAB7.name} defines no {sorted(missing)}"
    return namespace


def test_chapter7_lab_glues_every_name_its_prose_quotes():
    patterns = [p for code in cell_sources(LAB7, "code") for p in glue_names(code)]
    used = {key for text in cell_sources(LAB7, "markdown") for key in GLUED.findall(text)}
    unknown = sorted(key for key in used if not any(p.fullmatch(key) for p in patterns))
    assert not unknown, f"{LAB7.name}: prose pastes {unknown}, which no code cell glues"


@pytest.mark.parametrize("depth", [2, 6])
def test_chapter7_lab_trains_every_arm_side_by_side_as_it_would_alone(depth):
    """The lab trains four arms x five runs as one stack of networks; each copy must end where DeepMLP, trained
    alone from the same starting weights with the lab's own train(), ends (up to rounding: the stacked products
    add the same terms in another order)."""
    toy = lab7_toy()
    g = torch.Generator().manual_seed(0)
    toy["X"], toy["Y"] = torch.randn(64, 16, generator=g), torch.randn(64, 1, generator=g)
    together = toy["train_arms"](depth, steps=3)
    assert list(together) == list(toy["ARMS"]) and len(toy["RUNS"]) == 5
    for arm, (residual, norm) in toy["ARMS"].items():
        for k, run in enumerate(toy["RUNS"]):
            torch.manual_seed(run)
            alone, _ = toy["train"](toy["DeepMLP"](depth, residual, norm), toy["X"], toy["Y"], steps=3)
            # the chain of sums: the input layer (16 terms), depth layers of 32, the output layer (32), the mean (64)
            assert_same_up_to_rounding(together[arm][0][k], torch.tensor(alone), depth=16 + 32 * depth + 32 + 64,
                                       what=f"{arm}, run {run}: the loss trained side by side and alone")


def test_chapter5_lab_says_which_position_1_maximum_is_which():
    """The lab prints two maxima of the attention on position 1 (over blocks of the mean over prompts, and over
    single prompts); the prose quotes both, each with its label, from the glued values."""
    lab = ROOT / "chapters" / "05_self_attention_lab.ipynb"
    prose = "\n".join(cell_sources(lab, "markdown"))
    code = "\n".join(cell_sources(lab, "code"))
    for model in ["smol", "gemma"]:
        assert "{glue:text}`" + model + "_on1_max" in prose and "{glue:text}`" + model + "_on1_single_max" in prose
    assert "averaged over the prompts" in prose and "in a single prompt" in prose
    assert "averaged over the" in code and "of a single prompt" in code          # the printout labels them too


def test_chapter9_lab_compares_beam_search_with_the_rows_its_table_prints():
    """The beam-search sentence quotes the table's rows: beam search, and greedy on the same prompts (a row of
    its own), and names the all-prompt greedy row it is not compared with."""
    lab = ROOT / "chapters" / "09_lm_head_and_sampling_lab.ipynb"
    code = "\n".join(cell_sources(lab, "code"))
    assert "'greedy, first ' + str(n_beam) + ' prompts'" in code              # the row the table prints
    assert 'the row \\"greedy, first {n_beam} prompts\\"' in code               # the row the sentence quotes
    assert "assert len(beam_lp) == n_beam < len(per_token[\"greedy\"])" in code
