"""Chapter 15 (the logit lens): the rules its page keeps, read from the notebook without running it, and
the chapter's own functions run on a small model and against their checks.

The notebook itself runs in the book build; here its cells are parsed and its inline functions compiled.
"""
import ast
import json
import re
from pathlib import Path

import pytest
import torch

from llmlab import assert_same_up_to_rounding, forward_depth

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "15_logit_lens.ipynb"
LAB = ROOT / "chapters" / "15_logit_lens_lab.ipynb"
FOLDED = {"remove-cell", "hide-input", "hide-cell", "solution", "colab-setup"}


def cells(page=CHAPTER):
    return [(c["cell_type"], "".join(c["source"]), set(c.get("metadata", {}).get("tags", [])))
            for c in json.loads(page.read_text())["cells"]]


def unfolded_markdown(page=CHAPTER) -> str:
    """The markdown a reader sees without opening anything (dropdowns and solutions left out)."""
    text = "\n".join(source for kind, source, _ in cells(page) if kind == "markdown")
    return re.sub(r"```\{(dropdown|solution)\}.*?\n```", "", text, flags=re.S)


def chapter_function(name: str, page=CHAPTER, **namespace):
    """Compile the function `name` that the chapter (or its lab) defines inline."""
    for kind, source, tags in cells(page):
        if kind != "code" or "colab-setup" in tags:
            continue
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                namespace.setdefault("torch", torch)
                exec(compile(ast.Module([node], []), str(page), "exec"), namespace)
                return namespace[name]
    raise AssertionError(f"{page.name} defines no function {name}")


def test_the_chapter_opens_with_the_idea_and_its_diagram_before_any_code():
    notebook = cells()
    idea = next(i for i, (_, source, _) in enumerate(notebook) if "## The idea in two minutes" in source)
    assert all(kind == "markdown" or "colab-setup" in tags for kind, _, tags in notebook[:idea])
    assert "ch15_logit_lens.svg" in notebook[idea][1]
    headings = [line for kind, source, _ in notebook if kind == "markdown"
                for line in source.splitlines() if line.startswith("## ")]
    assert headings[:3] == ["## The idea in two minutes", "## The lens, by hand",
                            '## On the real model: when does " Paris" appear?']
    # the evidence is in the lab: KL and nats are taught there, intervals are drawn there, and the lesson uses neither
    lesson = unfolded_markdown()
    lab = unfolded_markdown(LAB)
    assert lab.startswith("# Lab 15: ") and "{doc}`15_logit_lens`" in lab and "{doc}`appendix_evidence`" in lab
    assert "<15_logit_lens_lab>`" in lesson
    assert "**Kullback-Leibler divergence**" in lab and "**nat**" in lab
    for term in ["KL", "nats", "95%", "interval"]:
        assert not re.search(rf"\b{term}\b", re.sub(r"\(data:image[^)]*\)", "", lesson)), term


@pytest.mark.parametrize("page", [CHAPTER, LAB], ids=["lesson", "lab"])
def test_visible_code_needs_nothing_from_the_hidden_cells(page):
    """A reader who copies the cells they see gets working code: no name used there is defined only in a
    removed cell, and glue() and assertions stay out of sight."""
    defined_hidden, defined_seen, used_seen = set(), set(), set()
    for kind, source, tags in cells(page):
        if kind != "code" or "colab-setup" in tags:
            continue
        tree = ast.parse(source)
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        names |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        names |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                  for a in n.names}
        if "remove-cell" in tags:
            defined_hidden |= names
            continue
        defined_seen |= names
        used_seen |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        assert "glue(" not in source, source[:80]
        if not tags:
            assert not re.search(r"^\s*(assert |torch.testing.assert_close)", source, re.M), source[:80]
            assert "getsource" not in source and "inspect." not in source      # no printed library source
    only_hidden = (used_seen & defined_hidden) - defined_seen
    assert not only_hidden, f"visible code uses names defined only in hidden cells: {sorted(only_hidden)}"


def test_one_block_numbering_and_the_book_s_own_words():
    text = unfolded_markdown() + unfolded_markdown(LAB)
    for phrase in ["relative depth", "row 0 = emb", "(row ", "the sources", "seed text", "seed lecture", "seed blog",
                   "source lecture", "hidden cell",
                   "earlier version", "first version", "to keep the chapter fast"]:
        assert phrase not in text.lower(), phrase
    assert "sec-intervals" in text                                   # intervals are explained in chapter 1


def test_activation_patching_is_defined_at_the_label_chapter_16_links_to():
    text = "\n".join(source for kind, source, _ in cells() if kind == "markdown")
    after = text.split("(sec-activation-patching)=", 1)[1]
    heading, body = after.strip().split("\n", 1)
    assert heading.startswith("## ") and "ctivation patching" in heading
    definition = body[:body.index("causal tracing")]
    assert "**activation patching**" in definition and "overwrite one of its activations" in definition


def test_every_exercise_check_says_why_it_passes_in_the_book():
    """The Exercises section of the lesson and of the lab opens by saying why a check shows "Passed" in the book."""
    for page, n_checks in [(CHAPTER, 2), (LAB, 2)]:
        notebook = cells(page)
        checks = [kind == "code" and re.search(r"^(?:\w+ = )?check\(\"(\w+)\"", source, re.M) is not None
                  for kind, source, _ in notebook]
        assert sum(checks) == n_checks
        exercises = "\n".join(source for kind, source, _ in notebook if kind == "markdown").split("## Exercises", 1)[1]
        assert exercises.lstrip().startswith("Each exercise gives its statement, then a folded cell with the reference "
                                             "solution, then a check.")
        assert "reference solution" in exercises and "Passed" in exercises


def test_token_states_reads_what_capture_reads():
    """The chapter's batch reader agrees with llmlab's capture, at the last token and at every token."""
    from fakes import CharTokenizer

    from llmlab.config import ModelConfig
    from llmlab.tokenization.base import pad_left
    from llmlab.inspection import capture, hook_name, hooks
    from llmlab.model import Transformer

    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset("tiny-llama")).eval()
    tok = CharTokenizer()
    tok.encode_batch = lambda texts: pad_left([tok.encode(t) for t in texts], 0)   # left padding, like llmlab
    token_states = chapter_function("token_states", page=LAB, hook_name=hook_name, hooks=hooks, capture=capture)
    texts = ["abcab", "ba", "cabbage"]
    last = token_states(model, tok, texts)                        # (L+1, 3, d)
    every = token_states(model, tok, texts, every_token=True)     # (L+1, n_tokens, d)
    # a padded batch against one text at a time: every block on other shapes, up to rounding
    depth = forward_depth(model.config, 7, head=False)
    rows = []
    for k, text in enumerate(texts):
        _, cache = capture(model, tok, text)
        stream = cache.accumulated_resid()[:, 0]                  # (L+1, T, d)
        assert_same_up_to_rounding(last[:, k], stream[:, -1], depth=depth)
        rows.append(stream[:, 1:])                                # every token but the first
    assert_same_up_to_rounding(every, torch.cat(rows, 1), depth=depth)


@pytest.mark.slow
def test_the_chapter_s_tuned_lens_passes_its_check_and_falls_back_to_the_logit_lens():
    from llmlab.exercises import check

    tuned_lens = chapter_function("tuned_lens", page=LAB)
    assert check("tuned_lens", tuned_lens, quiet=True).passed
    g = torch.Generator().manual_seed(0)
    stream = torch.randn(4, 30, 8, generator=g)
    train = torch.arange(30) < 20
    weight, unembed = torch.rand(8, generator=g) + 0.5, torch.randn(11, 8, generator=g)
    x = stream[2][~train]
    plain = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight) @ unembed.T
    shifted = tuned_lens(stream, train, 1, weight, 1e-6, unembed, ridge=1e12)   # a huge ridge: A -> 0, only b is left
    change = (stream[-1] - stream[2])[train].mean(0)
    x_shift = x + change
    expected = (x_shift * torch.rsqrt(x_shift.pow(2).mean(-1, keepdim=True) + 1e-6) * weight) @ unembed.T
    # up to rounding: the mean shift over 20 rows, the norm and the unembedding (8 terms each) in another
    # order; what the ridge leaves of A (about 1e-12 of it) is far below float32 rounding
    assert_same_up_to_rounding(shifted, expected, depth=20 + 8 + 8)
    assert (shifted - plain).abs().max() > 1e-2                   # the shift b is a real change, not rounding
