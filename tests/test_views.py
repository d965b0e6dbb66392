"""The static views open offline in headless Chromium and respond to hover/click; the live
widgets re-render; the matplotlib helpers draw."""
import json
import re

import numpy as np
import pytest
import torch

from browser import open_in_browser, read_png
from llmlab.visualization import (
    AttentionView, BPEMergeView, LensView, SamplingView, SimilarityView, TokensView, save_page,
)
from llmlab.visualization.html import pack_unit_floats, to_json, visible
from llmlab.visualization.widgets import filtered_probs
from fakes import CharTokenizer

TOKENS = ["The", " cat", " sat", " on", " the", " mat", "</script>"]


def attention_weights(layers=3, heads=2, seed=0):
    rng = np.random.default_rng(seed)
    T = len(TOKENS)
    w = rng.random((layers, heads, T, T)) * np.tril(np.ones((T, T)))
    return w / w.sum(-1, keepdims=True)


def hover(selector, index=0, event="mouseover"):
    """JS: dispatch `event` on the index-th element matching selector."""
    return (f"var nodes = document.querySelectorAll({json.dumps(selector)});"
            f"if (!nodes.length) throw new Error('nothing matches {selector}');"
            f"nodes[{index}].dispatchEvent(new MouseEvent('{event}', {{bubbles: true}}));")


def readouts(dom):
    return [re.sub(r"<[^>]+>", "", r) for r in re.findall(r'class="llmlab-readout"[^>]*>(.*?)</div>', dom, re.S)]


def open_view(view, tmp_path, js=None, name="view"):
    path = view.save(tmp_path / f"{name}.html")
    html = path.read_text()
    assert "http://" not in html and "https://" not in html, "a view must not reference the network"
    result = open_in_browser(path, js=js, screenshot=tmp_path / f"{name}.png", width=900, height=600)
    assert result.errors == [], result.errors
    return result


def test_helpers():
    assert visible(" Paris\n") == "\u2423Paris\u21b5"
    assert "</script>" not in to_json({"t": "</script>"})
    assert json.loads(to_json({"t": "</script>\u2028"})) == {"t": "</script>\u2028"}
    assert pack_unit_floats([0.0, 1.0]) == "AP8="


def test_views_check_their_input():
    with pytest.raises(ValueError, match="T = len"):
        AttentionView(TOKENS[:3], attention_weights())
    with pytest.raises(ValueError, match="labels"):
        SimilarityView(np.eye(3), ["a", "b"])
    with pytest.raises(ValueError, match="positions"):
        LensView(["a"], ["embed"], [[["x"]]], np.ones((1, 2, 1)))


def test_each_render_has_its_own_id():
    view = SimilarityView(np.eye(2), ["a", "b"])
    ids = {re.search(r'id="(llmlab-similarity-[0-9a-f]+)"', view._repr_html_()).group(1) for _ in range(3)}
    assert len(ids) == 3


def test_attention_view_hover_selects_query_and_key(tmp_path):
    w = attention_weights()
    view = AttentionView(TOKENS, w, title="attention")
    T = len(TOKENS)
    # hover the cell (query 3, key 1) after switching to layer 2, head 1
    js = ("var root = document.querySelector('.llmlab-attention');"
          "var selects = root.querySelectorAll('select');"
          "selects[0].value = '2'; selects[0].dispatchEvent(new Event('change'));"
          "selects[1].value = '1'; selects[1].dispatchEvent(new Event('change'));"
          + hover("td.llmlab-cell", 3 * T + 1))
    result = open_view(view, tmp_path, js)
    expected = f"layer 2 · head 1 · \"\u2423on\" → \"\u2423cat\": {round(w[2, 1, 3, 1] * 255) / 255:.3f}"
    assert expected in readouts(result.dom)
    # the hovered row is outlined and cells are coloured by weight
    assert result.dom.count("llmlab-cell llmlab-hl") == T
    assert "</script>" in result.dom and "&lt;/script&gt;" in result.dom  # a token, shown as text
    # the screenshot differs from the page before the hover
    before = open_view(view, tmp_path, None, name="before")
    after_png, before_png = read_png(result.screenshot), read_png(before.screenshot)
    assert after_png.std() > 0.05, "the screenshot is blank"
    assert np.abs(after_png - before_png).max() > 0.2, "hovering changed nothing on screen"


def test_attention_view_mean_of_heads(tmp_path):
    w = attention_weights(layers=1, heads=2)
    view = AttentionView(TOKENS, w)
    js = ("var s = document.querySelectorAll('select')[1]; s.value = '2'; s.dispatchEvent(new Event('change'));"
          + hover("td.llmlab-cell", len(TOKENS) * 6 + 6))
    result = open_view(view, tmp_path, js)
    quantised = np.round(w * 255) / 255
    assert f": {quantised[0, :, 6, 6].mean():.3f}" in readouts(result.dom)[0]


def test_two_views_on_one_page_work_independently(tmp_path):
    a = SimilarityView(np.array([[1.0, 0.5], [0.5, 1.0]]), ["a", "b"], title="first")
    b = SimilarityView(np.array([[1.0, -0.25], [-0.25, 1.0]]), ["c", "d"], title="second")
    path = save_page([a, b, a], tmp_path / "page.html")
    result = open_in_browser(path, js=hover("td.llmlab-cell", 5))   # cells 4..7 belong to the second view
    assert result.errors == []
    texts = readouts(result.dom)
    assert len(texts) == 3
    assert texts[1] == '"c" vs "d": -0.2500'          # only the hovered view changed
    assert texts[0] == texts[2] == "Hover a cell to read its value."


def test_lens_view_hover_shows_top_k_and_target_rank(tmp_path):
    top_tokens = [[["a", "b"], [" Paris", " Rome"]], [["c", "d"], [" Rome", " Paris"]]]
    top_probs = np.array([[[0.5, 0.2], [0.9, 0.05]], [[0.4, 0.3], [0.6, 0.3]]])
    view = LensView(["The", " city"], ["embed", "layer 0"], top_tokens, top_probs, target=" Paris",
                    target_rank=[[5, 0], [7, 1]], target_prob=[[0.01, 0.9], [0.001, 0.3]])
    result = open_view(view, tmp_path, hover("td.llmlab-cell", 3) + hover("td.llmlab-cell", 3, "click"))
    text = readouts(result.dom)[0]
    assert "layer 0 · position 1" in text and "[pinned]" in text
    assert "1. \u2423Rome" in text and "2. \u2423Paris" in text
    assert 'target "\u2423Paris": rank 2, p = 0.3000' in text
    assert result.dom.count("llmlab-cell llmlab-target") == 1     # only the cell where the target is top-1


def test_tokens_view_hover_and_click(tmp_path):
    view = TokensView({"toy": [("Hel", 10), ("lo", 11, b"lo"), (" 天", 12, " 天".encode()),
                               ("\ufffd", 13, b"\xe5\xa4"), ("\ufffd", 14, b"\xa9")]})
    assert [t["text"] for t in view.data["rows"][0]["tokens"][3:]] == ["\\xe5\\xa4", "\\xa9"]
    js = hover(".llmlab-tok", 2) + "document.querySelector('button').click();"
    result = open_view(view, tmp_path, js)
    assert readouts(result.dom)[0] == 'toy · token 2 · id 12 · " 天" · bytes 20 e5 a4 a9'
    assert "hide ids" in result.dom and 'class="llmlab-id" style="display: block;"' in result.dom


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.5, 3, 1.0), (1.7, 0, 0.6), (0.0, 0, 1.0),
                                                     (1.0, 2, 0.5)])
def test_sampling_view_matches_llmlab_sampling(tmp_path, temperature, top_k, top_p):
    logits = np.array([[3.0, 2.5, 2.5, 1.0, 0.0, -1.0]])
    view = SamplingView(["p"], [["a", "b", "c", "d", "e", "f"]], logits)
    js = "".join(
        f"var s = document.querySelector('input[data-name=\"{name}\"]'); s.value = '{value}';"
        f"s.dispatchEvent(new Event('input'));" for name, value in
        [("temperature", temperature), ("top_k", top_k), ("top_p", top_p)])
    result = open_view(view, tmp_path, js, name="sampling")
    shown = [float(v) for v in re.findall(r'llmlab-bar-value">([0-9.]+)<', result.dom)]
    probs, keep = filtered_probs(logits[0], temperature, top_k, top_p)
    np.testing.assert_allclose(shown, probs, atol=1e-3)
    assert result.dom.count("llmlab-bar llmlab-off") == int((~keep).sum())


def test_bpe_view_steps_through_merges(tmp_path):
    view = BPEMergeView.from_text("low lower lowest low", 4)
    assert view.data["steps"][1]["merged"] in ("lo", "ow")
    js = "var b = document.querySelector('button[data-action=next]'); b.click(); b.click();"
    result = open_view(view, tmp_path, js, name="bpe")
    step = view.data["steps"][2]
    assert readouts(result.dom)[0].startswith(f'step 2: merge "{step["pair"][0]}" + "{step["pair"][1]}"')
    assert len(re.findall(r'<span class="llmlab-tok"', result.dom)) == len(step["tokens"])


def test_views_still_show_something_without_javascript(tmp_path):
    view = AttentionView(TOKENS, attention_weights())
    html = view.save(tmp_path / "v.html").read_text()
    no_js = re.sub(r"<script>.*?</script>", "", html, flags=re.S)
    (tmp_path / "nojs.html").write_text(no_js)
    result = open_in_browser(tmp_path / "nojs.html")
    assert 'title="\u2423on → \u2423cat:' in result.dom


def test_filtered_probs_matches_sampling_functions():
    from llmlab.sampling import top_k_filter, top_p_filter

    logits = torch.tensor([2.0, 1.0, 0.5, -1.0])
    probs, keep = filtered_probs(logits.numpy(), 0.7, 3, 0.9)
    ref = torch.softmax(top_p_filter(top_k_filter(logits[None] / 0.7, 3), 0.9), -1)[0]
    np.testing.assert_allclose(probs, ref.numpy(), atol=1e-6)
    assert keep.tolist() == (ref > 0).tolist()


@pytest.fixture(scope="module")
def tiny():
    from llmlab.config import ModelConfig
    from llmlab.model import Transformer

    torch.manual_seed(0)
    return Transformer(ModelConfig.preset("tiny-llama")).eval(), CharTokenizer()


def test_attention_explorer_rerenders(tiny):
    from llmlab.visualization import attention_explorer

    box = attention_explorer({"tiny": tiny}, prompt="abc")
    text, (model_pick, layer_pick, head_pick), out = box.children[0], box.children[1].children, box.children[2]
    assert out.value.count('class="llmlab-cell"') == 9
    assert "<script" not in out.value          # scripts do not run inside ipywidgets.HTML
    text.value = "hello"
    assert out.value.count('class="llmlab-cell"') == 25
    first = out.value
    head_pick.value = 1
    layer_pick.value = 1
    assert out.value != first


def test_lens_and_sampling_explorers(tiny):
    from llmlab.visualization import lens_explorer, sampling_explorer

    box = lens_explorer(tiny, prompt="ab", target="c")
    assert box.children[2].value.count('class="llmlab-cell"') == 2 * 3     # 2 positions x (embed + 2 layers)
    box.children[1].children[0].value = "cc"                                 # two tokens: a readable error
    assert "2 tokens" in box.children[2].value
    box = sampling_explorer(tiny, prompt="ab", n=5)
    out = box.children[3]
    before = out.value
    box.children[2].children[0].value = 0.0                                  # temperature 0: greedy
    assert out.value != before and out.value.count(">1.000<") == 1


def test_matplotlib_helpers(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from llmlab.inspection.lens import LensResult
    from llmlab.visualization import plot_attention, plot_lens, plot_similarity

    ax = plot_attention(attention_weights()[0, 0], TOKENS, title="t")
    assert len(ax.get_xticklabels()) == len(TOKENS)
    lens = LensResult(tokens=["a", "b"], positions=[0, 1], layer_labels=["embed", "layer 0"],
                      top_ids=torch.zeros(2, 2, 1, dtype=torch.long), top_probs=torch.full((2, 2, 1), 0.5),
                      top_tokens=[[["x"], ["y"]], [["z"], ["w"]]])
    ax = plot_lens(lens)
    assert [t.get_text() for t in ax.texts] == ["x", "y", "z", "w"]
    ax = plot_similarity(np.array([[1.0, -0.5], [-0.5, 1.0]]), ["a", "b"], annotate=True)
    ax.figure.savefig(tmp_path / "sim.png")
    with pytest.raises(ValueError, match="T = len"):
        plot_attention(np.ones((2, 2)), TOKENS)


def test_view_inserted_like_jupyterlab_renders(tmp_path):
    """JupyterLab sets innerHTML (scripts do not run) and then re-creates each <script> so it runs;
    the view must find its div from the script, with another copy of the view already on the page."""
    view = SimilarityView(np.array([[1.0, 0.5], [0.5, 1.0]]), ["a", "b"])
    fragment = view._repr_html_()
    page = tmp_path / "lab.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>" + view._repr_html_()
        + "<div id='output'></div><script>\n"
        + "var host = document.getElementById('output');\n"
        + "host.innerHTML = " + json.dumps(fragment).replace("</", "<\\/") + ";\n"
        + "Array.prototype.slice.call(host.getElementsByTagName('script')).forEach(function (old) {\n"
        + "  var s = document.createElement('script'); s.textContent = old.textContent;\n"
        + "  old.parentNode.replaceChild(s, old);\n"
        + "});\n</script></body></html>")
    result = open_in_browser(page, js=hover("#output td.llmlab-cell", 1))
    assert result.errors == []
    assert readouts(result.dom) == ["Hover a cell to read its value.", '"a" vs "b": 0.5000']


def test_views_built_from_a_tiny_model(tiny, tmp_path):
    model, tok = tiny
    attention = AttentionView.from_model(model, tok, "hello", layers=[-1])
    assert attention.weights.shape == (1, model.config.n_heads, 5, 5)
    assert attention.data["layers"] == ["layer 1"]
    lens = LensView.from_model(model, tok, "abc", target="a")
    assert lens.data["layers"][0] == "embed" and lens.data["target"] == "a"
    tokens = TokensView.from_tokenizers("ab c", {"chars": tok})
    assert [t["id"] for t in tokens.data["rows"][0]["tokens"]] == [1, 2, 0, 3]
    path = save_page([attention, lens, tokens], tmp_path / "all.html")
    result = open_in_browser(path, js=hover(".llmlab-lens td.llmlab-cell", 2))
    assert result.errors == []
    assert any(text.startswith("embed · position 2") for text in readouts(result.dom))
