"""The live explorers (llmlab.visualization.widgets) for Jupyter and Colab, and what they show in the built book."""
import ipywidgets
import pytest

import llmlab
from llmlab.visualization import (
    attention_explorer, lens_explorer, sampling_explorer, similarity_explorer, tokenizer_explorer,
)
from llmlab.visualization.widgets import StaticHTML, token_similarity


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


def test_explorers_show_their_opening_view_in_the_built_book(smol, monkeypatch):
    """In the built book no kernel redraws the widgets: each explorer is the view of its opening settings,
    which works in the static page; the views the live model can rerun carry its "Run live" box."""
    from llmlab.visualization import AttentionView, LensView, SamplingView, TokensView

    monkeypatch.setenv("LLMLAB_BOOK_BUILD", "1")
    attention = attention_explorer(smol, prompt="The cat sat", layer=3, head=2)
    assert isinstance(attention, AttentionView) and attention.data["head"] == 2
    assert attention.data["layers"][attention.data["layer"]] == "block 3"          # opens on the block asked for
    n = smol[0].config.n_layers
    assert {"block 0", f"block {n - 1}"} <= set(attention.data["layers"]) and len(attention.data["layers"]) <= 7
    lens = lens_explorer(smol, prompt="The capital of France is", target=" Paris")
    sampling = sampling_explorer(smol, prompt="Once upon a time")
    tokens = tokenizer_explorer({"SmolLM2": smol[1]}, text="unbelievable")
    for view, kind in ((attention, AttentionView), (lens, LensView), (sampling, SamplingView), (tokens, TokensView)):
        assert isinstance(view, kind) and view.data["live"]["prompt"], kind       # the "Run live" box
        assert "needs a running Python kernel" not in view._repr_html_()
    assert sampling.data["prompts"] == ["Once upon a time"]
    chart = similarity_explorer(smol)
    assert isinstance(chart, StaticHTML) and "<svg" in chart._repr_html_() and "baseline" in chart._repr_html_()
