"""The live explorers (llmlab.visualization.widgets) for Jupyter and Colab, and what they show in the built book."""
import ipywidgets
import pytest

import llmlab
from llmlab.visualization import (
    attention_explorer, lens_explorer, sampling_explorer, similarity_explorer, tokenizer_explorer,
)
from llmlab.visualization.widgets import KernelNote, token_similarity


@pytest.fixture(scope="module")
def smol():
    return llmlab.load("smollm2-135m", device="cpu")


def output_of(box) -> ipywidgets.HTML:
    return next(child for child in box.children if isinstance(child, ipywidgets.HTML))


@pytest.mark.parametrize("make", [
    lambda m: attention_explorer(m, prompt="The cat sat", layer=5, head=6),
    lambda m: lens_explorer(m, prompt="The Eiffel Tower is in the city of", target=" Paris"),
    lambda m: sampling_explorer(m, prompt="The capital of France is"),
    lambda m: tokenizer_explorer({"SmolLM2": m[1]}, text="Tokens: 天气很好"),
    lambda m: similarity_explorer(m),
], ids=["attention", "lens", "sampling", "tokenizer", "similarity"])
def test_explorer_redraws_when_the_prompt_changes(smol, make):
    box = make(smol)
    out = output_of(box)
    before = out.value
    box.children[0].value = "我喜欢喝茶，因为它"
    assert out.value != before and "<b>" not in out.value[:300]    # redrawn, and not an error message


def test_similarity_of_a_token_with_itself_starts_at_one_and_has_a_baseline(smol):
    model, tokenizer = smol
    r = token_similarity(model, tokenizer, "I sat on the bank of the river.", "I paid the cash into the bank.",
                         " bank", " bank")
    assert r["layers"][0] == "embed" and len(r["pair"]) == model.config.n_layers + 1
    # the same token, before any context: cosine 1 up to rounding of its sums over d
    llmlab.assert_same_up_to_rounding(r["pair"][0], 1.0, depth=model.config.d_model)
    assert all(lo <= mean <= hi for lo, mean, hi in zip(r["low"], r["baseline"], r["high"]))
    assert r["tokens"] == [" bank", " bank"]


def test_similarity_explorer_says_what_is_wrong(smol):
    model, tokenizer = smol
    with pytest.raises(ValueError, match="'bank' is not one of the tokens of 'a bank'.*spaces count"):
        token_similarity(model, tokenizer, "a bank", "the bank", "bank", -1)
    with pytest.raises(ValueError, match="position 5 is outside the 2 tokens"):
        token_similarity(model, tokenizer, "a bank", "the bank", 5, -1)
    box = similarity_explorer(smol, token_a="river")
    assert "is not one of the tokens" in output_of(box).value


def test_explorers_show_a_note_in_the_built_book(smol, monkeypatch):
    monkeypatch.setenv("LLMLAB_BOOK_BUILD", "1")
    for explorer in (attention_explorer, lens_explorer, sampling_explorer, similarity_explorer):
        note = explorer(smol)
        assert isinstance(note, KernelNote) and "needs a running Python kernel" in note._repr_html_()
    assert isinstance(tokenizer_explorer({"SmolLM2": smol[1]}), KernelNote)
