"""The static views open offline in headless Chromium and respond to hover/click; the live
widgets re-render; the matplotlib helpers draw."""
import json
import re

import numpy as np
import pytest
import torch

from browser import open_in_browser, read_png
from llmlab.sampling import filtered_probs
from llmlab.visualization import (
    AttentionView, BPEMergeView, LensView, SamplingView, SimilarityView, TokensView, mask_view, save_page,
    show_token, show_token_ids,
)
from llmlab.visualization.html import pack_unit_floats, to_json, visible
from llmlab.visualization.attention_views import informative_row
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
    assert visible("<bos>") == "\u27e8bos\u27e9"
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
    expected = (f"block 2 · head 1 · \"\u2423on\" (position 3) → \"\u2423cat\" (position 1): "
                f"{round(w[2, 1, 3, 1] * 255) / 255:.3f}")
    assert readouts(result.dom)[0].startswith(expected)
    # the hovered cell is outlined, and the headers of its row and column
    assert result.dom.count("llmlab-cell llmlab-hl") == 1
    assert result.dom.count('llmlab-row llmlab-hl" ') + result.dom.count('llmlab-row llmlab-hl"') >= 1
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
    assert f": {quantised[0, :, 6, 6].mean():.3f}" in readouts(result.dom)[0].splitlines()[0]


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
    view = LensView(["The", " city"], ["embed", "block 0"], top_tokens, top_probs, target=" Paris",
                    target_rank=[[5, 0], [7, 1]], target_prob=[[0.01, 0.9], [0.001, 0.3]])
    result = open_view(view, tmp_path, hover("td.llmlab-cell", 3) + hover("td.llmlab-cell", 3, "click"))
    text = readouts(result.dom)[0]
    assert "block 0 · position 1" in text and "[pinned]" in text
    assert "1. \u2423Rome" in text and "2. \u2423Paris" in text
    assert 'target "\u2423Paris": rank 2, p = 0.3000' in text
    assert result.dom.count("llmlab-cell llmlab-target") == 1     # only the cell where the target is top-1


def test_tokens_view_hover_and_click(tmp_path):
    view = TokensView({"toy": [("Hel", 10), ("lo", 11, b"lo"), (" 天", 12, " 天".encode()),
                               ("\ufffd", 13, b"\xe5\xa4"), ("\ufffd", 14, b"\xa9")]})
    assert [t["text"] for t in view.data["rows"][0]["tokens"][2:]] == ["\u2423天", "<e5><a4>", "<a9>"]
    js = hover(".llmlab-tok", 2) + "document.querySelector('button').click();"
    result = open_view(view, tmp_path, js)
    assert readouts(result.dom)[0] == 'toy · token 2 · id 12 · "\u2423天" · bytes 20 e5 a4 a9'
    assert "hide ids" in result.dom and re.search(r'class="llmlab-id"[^>]*style="display: block;"', result.dom)


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
    # display rounding, not float rounding: the page prints 3 decimals, half of 1e-3 off at most
    np.testing.assert_allclose(shown, probs, rtol=0, atol=1e-3)
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
    lens = LensResult(tokens=["a", "b"], positions=[0, 1], layer_labels=["embed", "block 0"],
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
    assert attention.data["layers"] == ["block 1"]
    lens = LensView.from_model(model, tok, "abc", target="a")
    assert lens.data["layers"][0] == "embed" and lens.data["target"] == "a"
    tokens = TokensView.from_tokenizers("ab c", {"chars": tok})
    assert [t["id"] for t in tokens.data["rows"][0]["tokens"]] == [1, 2, 0, 3]
    path = save_page([attention, lens, tokens], tmp_path / "all.html")
    result = open_in_browser(path, js=hover(".llmlab-lens td.llmlab-cell", 2))
    assert result.errors == []
    assert any(text.startswith("embed · position 2") for text in readouts(result.dom))


# ---------------------------------------------------------------------------------------------
# What a reader does and sees: one Chromium run per test, the page's answers read back as JSON.

def run_in_page(path, js, width=1000, height=700, screenshot=None):
    """Run `js` in the page after load; `js` fills the object `out`, which comes back as a dict."""
    code = ("var out = {};\n" + js + "\ndocument.body.setAttribute('data-out', JSON.stringify(out));")
    result = open_in_browser(path, js=code, width=width, height=height, screenshot=screenshot)
    assert result.errors == [], result.errors
    import html as _html

    match = re.search(r'<body[^>]*\sdata-out="([^"]*)"', result.dom)
    assert match, "the page's script did not finish: " + result.dom[-400:]
    return json.loads(_html.unescape(match.group(1)))


# JS helpers available to the snippets below
PAGE_HELPERS = """
function q(sel, root) { return (root || document).querySelector(sel); }
function qa(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
function fire(node, type) { node.dispatchEvent(new MouseEvent(type, {bubbles: true})); }
function key(node, k) { node.dispatchEvent(new KeyboardEvent('keydown', {key: k, bubbles: true})); }
function cell(root, i, j) { return q('td.llmlab-cell[data-i="' + i + '"][data-j="' + j + '"]', root); }
function readout(root) { return q('.llmlab-readout', root).textContent; }
function rect(node) { var r = node.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; }
function setSlider(root, name, value) {
  var s = q('input[data-name="' + name + '"]', root); s.value = String(value); s.dispatchEvent(new Event('input'));
}
function choose(select, value) { select.value = String(value); select.dispatchEvent(new Event('change')); }
"""


class BytesTokenizer:
    """A vocabulary of byte strings (some of them pieces of a character) and one special token."""

    def __init__(self, pieces):
        self.token_bytes = list(pieces)
        self.special_tokens = {"<bos>": 0}

    def decode(self, ids):
        return b"".join(self.token_bytes[i] for i in ids).decode("utf-8", errors="replace")


def test_one_display_rule_for_tokens():
    assert show_token(" Paris") == "\u2423Paris"
    assert show_token("a\tb\r\n") == "a\u21e5b\u240d\u21b5"
    assert show_token(b"\xe5\xa4") == "<e5><a4>" and show_token(b"\xa9") == "<a9>"
    assert show_token(b" \xe5\xa4\xa9") == "\u2423天"                       # a whole character stays a character
    assert show_token(b"x\xe5") == "x<e5>"
    assert show_token("<|im_start|>") == "\u27e8im_start\u27e9" and show_token("<bos>") == "\u27e8bos\u27e9"
    assert show_token("<div>") == "<div>" and show_token("</script>") == "</script>"   # text, not special tokens
    assert show_token("\x00") == "<00>"
    tok = BytesTokenizer([b"<bos>", b"\xe6\x88", b"\xe6\x9e", b" \xe6\x9e\x9c", b"\x91"])
    shown = show_token_ids(tok, torch.tensor([0, 1, 2, 3, 4]))
    assert shown == ["\u27e8bos\u27e9", "<e6><88>", "<e6><9e>", "\u2423果", "<91>"]
    assert len(set(shown)) == len(shown), "byte fragments must be distinguishable"
    # labels that are not tokens keep their spaces: no ␣ in "SmolLM2 15" or "4: 5"
    view = SimilarityView(np.eye(2), ["SmolLM2 15", "4: 5"])
    assert view.data["rows"] == ["SmolLM2 15", "4: 5"] and "\u2423" not in view.static_html()
    assert SimilarityView(np.eye(2), [" a", " b"], token_labels=True).data["rows"] == ["\u2423a", "\u2423b"]


def test_sampling_candidates_from_a_tokenizer_keep_byte_fragments_apart():
    tok = BytesTokenizer([b"<bos>", b"\xe6\x88", b"\xe6\x9e", b"\xe8\x8b", b" apple", b"\xe9\xa6"])
    view = SamplingView.from_logits(["我最喜欢的水果是"], torch.tensor([[-9.0, 5.0, 4.0, 3.0, 2.0, 1.0]]), tok, n=4)
    assert view.data["candidates"][0] == ["<e6><88>", "<e6><9e>", "<e8><8b>", "\u2423apple"]


def test_mask_view_is_a_view_of_masks(tmp_path):
    from llmlab.attention import causal_mask, sliding_window_mask

    T = 10
    keys = torch.tensor([[1] * 8 + [0] * 2])                                     # two padding positions
    view = mask_view({"causal": causal_mask(T), "window 3": sliding_window_mask(T, 3), "padding": keys},
                     title="masks")
    assert view.data["names"] == ["causal", "window 3", "padding"]
    with pytest.raises(ValueError, match="other than 0/1"):
        mask_view({"weights": torch.rand(4, 4)})
    with pytest.raises(ValueError, match="same size"):
        mask_view({"a": causal_mask(3), "b": causal_mask(4)})
    with pytest.raises(ValueError, match="tokens"):
        mask_view({"a": causal_mask(3)}, tokens=["x"])
    path = view.save(tmp_path / "mask.html")
    out = run_in_page(path, PAGE_HELPERS + """
      var root = q('.llmlab-mask');
      out.selects = qa('select', root).length;
      out.legend = q('.llmlab-legend', root).textContent;
      choose(q('select', root), 1);
      fire(cell(root, 5, 2), 'mouseover');
      out.window = readout(root);
      out.summary = q('.llmlab-note', root).textContent;
      choose(q('select', root), 2);
      fire(cell(root, 4, 9), 'mouseover');
      out.padding = readout(root);
      cell(root, 0, 0).focus();
      key(cell(root, 0, 0), 'ArrowDown'); key(cell(root, 1, 0), 'ArrowDown'); key(cell(root, 2, 0), 'ArrowRight');
      out.keys = readout(root);
      out.focused = document.activeElement.getAttribute('aria-label');
      out.role = q('table', root).getAttribute('role');
    """, screenshot=tmp_path / "mask.png")
    assert out["selects"] == 1, "one selector, of masks: no layer or head pickers"
    assert "may attend" in out["legend"] and "masked" in out["legend"]
    assert out["window"] == "window 3 · t5 (position 5) → t2 (position 2): masked\nt5 may attend to t3..t5 (3 positions)"
    assert out["summary"].startswith(f"{int(sliding_window_mask(T, 3).sum())} of {T * T} scores kept")
    assert out["padding"].endswith("t4 may attend to t0..t7 (8 positions)")
    assert out["keys"].startswith("padding · t2 (position 2) → t1 (position 1): may attend")
    assert out["focused"] == "query t2, key t1: may attend" and out["role"] == "grid"


def lens_view(n_layers=31, T=6, k=5, seed=0):
    rng = np.random.default_rng(seed)
    probs = np.sort(rng.random((n_layers, T, k)), axis=-1)[..., ::-1] / k
    tokens = [[[f"w{l}_{t}_{r}" for r in range(k)] for t in range(T)] for l in range(n_layers)]
    return LensView([f"p{t}" for t in range(T)], ["embed"] + [f"block {l}" for l in range(n_layers - 1)], tokens,
                    probs, title="lens")


def test_lens_readout_stays_put_and_stays_near_the_last_layers(tmp_path):
    path = lens_view().save(tmp_path / "lens.html")
    out = run_in_page(path, PAGE_HELPERS + """
      var root = q('.llmlab-lens'), box = q('.llmlab-scroll', root), r = q('.llmlab-readout', root);
      out.before = rect(r).concat(rect(box));
      box.scrollTop = 0;
      fire(cell(root, 0, 0), 'mouseover');
      out.afterFirst = rect(r).concat(rect(box));
      box.scrollTop = box.scrollHeight;
      fire(cell(root, 30, 5), 'mouseover');
      out.afterLast = rect(r).concat(rect(box));
      out.text = readout(root);
      var last = rect(cell(root, 30, 5));
      out.gap = last[1] + last[3] - rect(r)[1];
      out.header = rect(q('th.llmlab-col', root))[1] - rect(box)[1];
      box.scrollLeft = 10000;
      out.rowLabel = rect(q('th.llmlab-row', root))[0] - rect(box)[0];
      out.legend = qa('.llmlab-legend', root).length;
    """, height=700, screenshot=tmp_path / "lens.png")
    assert out["before"] == out["afterFirst"] == out["afterLast"], "the readout or the table moved"
    assert out["text"].startswith("block 29 · position 5") and len(out["text"].splitlines()) == 6
    assert 0 < out["gap"] <= 700, "the readout is more than a screen away from the last layer"
    assert abs(out["header"]) <= 1 and abs(out["rowLabel"]) <= 1, "header row / first column did not stick"
    assert out["legend"] == 1


def test_pinning_and_keyboard_in_a_heatmap(tmp_path):
    m = np.arange(16, dtype=float).reshape(4, 4) / 15
    path = SimilarityView(m, list("abcd"), title="sim").save(tmp_path / "sim.html")
    out = run_in_page(path, PAGE_HELPERS + """
      var root = q('.llmlab-similarity'), log = [];
      fire(cell(root, 1, 1), 'click'); log.push(readout(root));      // pin
      fire(cell(root, 2, 2), 'mouseover'); log.push(readout(root));  // hover never overrides a pin
      fire(cell(root, 2, 2), 'click'); log.push(readout(root));      // a click elsewhere moves the pin
      fire(cell(root, 3, 3), 'mouseover'); log.push(readout(root));
      fire(cell(root, 2, 2), 'click'); log.push(readout(root));      // a click on the pinned cell unpins
      fire(cell(root, 3, 3), 'mouseover'); log.push(readout(root));
      cell(root, 3, 3).focus();
      key(cell(root, 3, 3), 'ArrowUp'); key(cell(root, 2, 3), 'ArrowLeft'); log.push(readout(root));
      key(cell(root, 2, 2), 'Enter'); log.push(readout(root));
      fire(cell(root, 0, 0), 'mouseover'); log.push(readout(root));
      key(cell(root, 2, 2), 'Escape'); log.push(readout(root));
      out.log = log;
      out.cells = qa('[role=gridcell]', root).length;
      out.label = cell(root, 0, 1).getAttribute('aria-label');
      out.tabbable = qa('td[tabindex="0"]', root).length;
      out.legend = [q('.llmlab-legend-min', root).textContent, q('.llmlab-legend-max', root).textContent];
    """)
    v = lambda i, j: f'"{"abcd"[i]}" vs "{"abcd"[j]}": {m[i, j]:.4f}'
    assert out["log"] == [v(1, 1) + " [pinned]", v(1, 1) + " [pinned]", v(2, 2) + " [pinned]", v(2, 2) + " [pinned]",
                          v(2, 2), v(3, 3), v(2, 2), v(2, 2) + " [pinned]", v(2, 2) + " [pinned]", v(2, 2)]
    assert out["cells"] == 16 and out["label"] == v(0, 1).replace('"', "") and out["tabbable"] == 1
    assert out["legend"] == ["0", "1"]


def test_touch_taps_show_and_pin_like_hovers(tmp_path):
    """A tap on a phone fires pointer events and a click, with no mouse hover first."""
    path = lens_view(n_layers=4).save(tmp_path / "lens.html")
    out = run_in_page(path, PAGE_HELPERS + """
      var root = q('.llmlab-lens'), td = cell(root, 2, 1);
      td.dispatchEvent(new PointerEvent('pointerdown', {bubbles: true, pointerType: 'touch'}));
      td.dispatchEvent(new PointerEvent('pointerup', {bubbles: true, pointerType: 'touch'}));
      fire(td, 'click');
      out.text = readout(root);
    """)
    assert out["text"].startswith("block 1 · position 1") and "[pinned]" in out["text"]


def sink_weights(layers=2, heads=3, T=8, seed=1):
    rng = np.random.default_rng(seed)
    w = rng.random((layers, heads, T, T)) * np.tril(np.ones((T, T)))
    w[..., 0] += 6.0                                    # most of every row goes to the first token
    return w / w.sum(-1, keepdims=True)


def test_heads_at_a_glance_and_the_sink_toggle(tmp_path):
    w = sink_weights()
    view = AttentionView([f"w{i}" for i in range(8)], w, title="heads")
    assert view.data["query"] == informative_row(w[0, 0])
    out = run_in_page(view.save(tmp_path / "heads.html"), PAGE_HELPERS + """
      var root = q('.llmlab-attention'), selects = qa('select', root);
      out.thumbs = qa('.llmlab-thumb', root).length;
      fire(qa('.llmlab-thumb', root)[2], 'click');
      out.afterThumb = [selects[1].value, readout(root).split('\\n')[0]];
      choose(selects[0], 1);
      out.active = q('.llmlab-thumb.llmlab-active', root).textContent;
      choose(selects[2], 1);
      out.everyLayer = qa('.llmlab-thumb', root).length;
      fire(qa('.llmlab-thumb', root)[7], 'click');
      out.mean = [selects[0].value, selects[1].value];
      choose(selects[1], 2);
      var box = q('input[data-name="hide-sink"]', root); box.checked = true; box.dispatchEvent(new Event('change'));
      out.rows = [];
      for (var i = 1; i < 8; i++) {
        var row = [];
        for (var j = 0; j < 8; j++) row.push(parseFloat(cell(root, i, j).getAttribute('aria-label').split(': ')[1]));
        out.rows.push(row);
      }
      out.readout = readout(root);
    """, screenshot=tmp_path / "heads.png")
    assert out["thumbs"] == 4                                       # 3 heads and their mean
    assert out["afterThumb"][0] == "2" and out["afterThumb"][1].startswith("block 0 · head 2 ·")
    assert out["active"] == "h2"                                    # the focus follows to the next layer
    assert out["everyLayer"] == 8
    assert out["mean"] == ["1", "3"]
    rows = np.array(out["rows"])
    # the rows without the sink are stored renormalised (to 1/255 of the renormalised value), not
    # recomputed from the 1/255 weights, where a big sink leaves too little of the rest
    expected = np.asarray(w[1, 2], dtype=np.float64)[1:, :].copy()
    expected[:, 0] = 0
    expected = expected / expected.sum(1, keepdims=True)
    # display rounding, not float rounding: half a step of 1/255, plus the label's printed digits
    np.testing.assert_allclose(rows, expected, rtol=0, atol=1 / 510 + 1e-3)
    np.testing.assert_allclose(rows.sum(1), 1.0, rtol=0, atol=5e-3)  # every row renormalised without the sink
    assert "first token hidden" in out["readout"]


def whole_vocabulary(V=3000, n=10, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(2, V)) * 1.5
    logits[:, :n] += np.linspace(9, 5, n)                         # a few sensible tokens above a long tail
    pieces = [b"<bos>"] + [f"t{i}".encode() for i in range(1, V)]
    return torch.tensor(logits), BytesTokenizer(pieces)


def test_sampling_shows_the_whole_vocabulary(tmp_path):
    logits, tok = whole_vocabulary()
    view = SamplingView.from_logits(["a", "b"], logits, tok, n=10, title="sampling")
    out = run_in_page(view.save(tmp_path / "sampling.html"), PAGE_HELPERS + """
      var root = q('.llmlab-sampling');
      function bars() { return qa('.llmlab-bar-value', root).map(function (n) { return parseFloat(n.textContent); }); }
      out.byT = {};
      [0.5, 1.0, 2.5].forEach(function (t) { setSlider(root, 'temperature', t); out.byT[t] = bars(); });
      out.otherLabel = q('.llmlab-other .llmlab-bar-label', root).textContent;
      setSlider(root, 'top_p', 0.9);
      out.nucleus = readout(root); out.nucleusBars = bars();
      setSlider(root, 'top_p', 1);
      var ks = q('input[data-name="top_k"]', root);
      setSlider(root, 'top_k', 11);                                  // the first k past the bars: 50
      out.topk = readout(root); out.topkBars = bars();
      setSlider(root, 'top_k', 0);
      var seed = 1; window.llmlab.random = function () { seed = (seed * 16807) % 2147483647; return seed / 2147483647; };
      fire(q('button[data-action=sample]', root), 'click');
      out.hot = qa('.llmlab-sample', root).map(function (n) { return n.className.indexOf('llmlab-other') >= 0; });
      setSlider(root, 'temperature', 0);
      fire(q('button[data-action=sample]', root), 'click');
      out.greedy = qa('.llmlab-sample', root).map(function (n) { return n.textContent; });
    """, screenshot=tmp_path / "sampling.png")
    z = logits[0].numpy()
    order = np.argsort(-z)
    for t in (0.5, 1.0, 2.5):
        probs, _ = filtered_probs(z, t)
        shown = probs[order[:10]]
        shown_in_page = out["byT"][f"{t:g}"]
        # display rounding, not float rounding: bars printed with 3 decimals, and the page's own softmax
        np.testing.assert_allclose(shown_in_page[:10], shown, rtol=0, atol=1.5e-3)
        assert abs(shown_in_page[10] - (1 - shown.sum())) < 1.5e-3     # the "all other tokens" bar
        assert abs(sum(shown_in_page) - 1) < 6e-3
    others = [out["byT"][f"{t:g}"][10] for t in (0.5, 1.0, 2.5)]
    assert others[0] < others[1] < others[2], "the rest of the vocabulary must grow with temperature"
    assert out["otherLabel"] == "all other 2,990 tokens"
    # top-p and top-k cut the real vocabulary
    probs, keep = filtered_probs(z, 2.5, 0, 0.9)
    kept = int(re.search(r"([\d,]+) of 3,000 tokens can be drawn", out["nucleus"]).group(1).replace(",", ""))
    assert abs(kept - int(keep.sum())) <= max(3, 0.01 * keep.sum()), (kept, int(keep.sum()))
    assert kept > 10 * 20
    np.testing.assert_allclose(out["nucleusBars"][:10], probs[order[:10]], rtol=0, atol=2e-3)   # display rounding
    probs, keep = filtered_probs(z, 2.5, 50, 1.0)
    assert "50 of 3,000 tokens can be drawn" in out["topk"]
    np.testing.assert_allclose(out["topkBars"][:10], probs[order[:10]], rtol=0, atol=1.5e-3)   # display rounding
    # samples come from the current settings: hot -> mostly outside the shown ten; greedy -> the top token
    assert len(out["hot"]) == 10 and sum(out["hot"]) >= 5
    assert out["greedy"] == [view.data["candidates"][0][0]] * 10


def test_narrow_and_wide_windows(tmp_path):
    logits, tok = whole_vocabulary()
    views = [SamplingView.from_logits(["a"], logits[:1], tok, n=10), lens_view(n_layers=8, T=12),
             SimilarityView(np.eye(12), ["天气", "苹果"] + [f"long label {i}" for i in range(10)]),
             AttentionView([f"word{i}" for i in range(20)], sink_weights(1, 2, 20)),
             mask_view({"causal": np.tril(np.ones((30, 30)))}), TokensView([("x" * 80, 1)] * 8)]
    path = save_page(views, tmp_path / "all.html")
    measure = PAGE_HELPERS + """
      out.pageWidth = document.documentElement.scrollWidth;
      out.bars = qa('.llmlab-bar-row').map(function (row) {
        return [q('.llmlab-bar', row).getBoundingClientRect().width / q('.llmlab-bar-track', row).getBoundingClientRect().width,
                parseFloat(q('.llmlab-bar-value', row).textContent)];
      });
      out.labels = qa('.llmlab-scroll').map(function (box) {
        box.scrollLeft = 100000;
        return rect(q('th.llmlab-row', box))[0] - rect(box)[0];
      });
      var cjk = qa('.llmlab-similarity th.llmlab-col .llmlab-col-text')[0], style = getComputedStyle(cjk);
      out.cjk = [style.writingMode, style.transform, cjk.textContent];
      var range = document.createRange(); range.setStart(cjk.firstChild, 0); range.setEnd(cjk.firstChild, 1);
      var first = range.getBoundingClientRect(); range.setStart(cjk.firstChild, 1); range.setEnd(cjk.firstChild, 2);
      var second = range.getBoundingClientRect();
      out.cjkOrder = [first.top, second.top, first.height, first.width];
    """
    narrow = run_in_page(path, measure, width=420, height=900, screenshot=tmp_path / "narrow.png")
    assert narrow["pageWidth"] <= 420, "the page overflows at 420 px"
    for ratio, value in narrow["bars"]:
        assert abs(ratio - value) < 0.01 + 2 / 200, (ratio, value)     # bar length = probability, at any width
    assert all(abs(x) <= 1 for x in narrow["labels"]), "row labels scrolled away"
    mode, transform, text = narrow["cjk"]
    assert mode == "vertical-rl" and transform == "none" and text == "天气"
    assert narrow["cjkOrder"][0] < narrow["cjkOrder"][1], "CJK header read in reverse"
    # chapter 12's table: 48 words fit an 1800 px window without horizontal scrolling
    wide = AttentionView([f"w{i}" for i in range(48)], sink_weights(1, 1, 48)).save(tmp_path / "wide.html")
    # inside the book's theme: larger, taller text around the view, and an article about 940 px wide
    wide.write_text(wide.read_text().replace("<body>", "<body style='font-size:16px;line-height:1.65;width:940px'>"))
    out = run_in_page(wide, PAGE_HELPERS + """
      var box = q('.llmlab-scroll'); out.fits = [box.scrollWidth, box.clientWidth];
    """, width=1800, height=1000, screenshot=tmp_path / "wide.png")
    assert out["fits"][0] <= out["fits"][1]


def test_lens_view_shows_byte_fragments_from_the_tokenizer():
    from llmlab.inspection.lens import LensResult

    tok = BytesTokenizer([b"<bos>", b"\xe6\x88", b"\xe6\x9e", b" Paris"])
    lens = LensResult(tokens=["a"], positions=[0], layer_labels=["embed"],
                      top_ids=torch.tensor([[[1, 2, 3]]]), top_probs=torch.tensor([[[0.5, 0.3, 0.2]]]),
                      top_tokens=[[["\ufffd", "\ufffd", " Paris"]]])
    assert LensView.from_lens(lens).data["top_tokens"] == [[["\ufffd", "\ufffd", "\u2423Paris"]]]
    assert LensView.from_lens(lens, tokenizer=tok).data["top_tokens"] == [[["<e6><88>", "<e6><9e>", "\u2423Paris"]]]


def test_tokens_are_reachable_with_the_keyboard(tmp_path):
    view = TokensView({"toy": [("a", 1), (" b", 2), ("c", 3)]})
    out = run_in_page(view.save(tmp_path / "tokens.html"), PAGE_HELPERS + """
      var toks = qa('.llmlab-tok'), root = q('.llmlab-token-row .llmlab-tokens');
      out.roles = [root.getAttribute('role'), toks[0].getAttribute('role'), toks[0].getAttribute('tabindex')];
      toks[0].focus(); key(toks[0], 'ArrowRight'); key(toks[1], 'ArrowRight');
      out.moved = readout(); out.focused = document.activeElement.getAttribute('aria-label');
      key(toks[2], 'Enter'); fire(toks[0], 'mouseover');
      out.pinned = readout();
    """)
    assert out["roles"] == ["listbox", "option", "0"]
    assert out["moved"] == 'toy · token 2 · id 3 · "c"' and out["focused"] == out["moved"]
    assert out["pinned"] == 'toy · token 2 · id 3 · "c" [pinned]'


def test_every_view_is_importable_from_the_package_and_its_own_module():
    """The views live in one module per topic; llmlab.visualization names the same objects."""
    import llmlab.visualization as package
    from llmlab.visualization import attention_views, sampling_views, table_views, token_views

    homes = {"AttentionView": attention_views, "MaskView": attention_views, "mask_view": attention_views,
             "LensView": table_views, "SimilarityView": table_views, "TokensView": token_views,
             "BPEMergeView": token_views, "SamplingView": sampling_views}
    for name, home in homes.items():
        assert getattr(home, name).__module__ == home.__name__, name
        assert name in package.__all__ and getattr(package, name) is getattr(home, name), name

# ------------------------------------------------------------------ defects a careful reader found

def test_sampling_view_never_shows_a_probability_above_one_and_clears_stale_samples(tmp_path):
    from llmlab.visualization import SamplingView

    rng = np.random.default_rng(0)
    logits = torch.tensor(rng.normal(0, 3, (1, 4000)), dtype=torch.float32)
    logits[0, 7] = 12.34567                      # one clear winner: at T = 0.05 it takes ~all the mass
    tok = CharTokenizer()
    view = SamplingView.from_logits(["a prompt"], logits, tok, n=10, stored=50)
    path = view.save(tmp_path / "sampling.html")
    out = run_in_page(path, PAGE_HELPERS + """
      var root = q('.llmlab-sampling');
      setSlider(root, 'temperature', 0.05);
      out.values = qa('.llmlab-bar-value', root).map(function (n) { return parseFloat(n.textContent); });
      setSlider(root, 'temperature', 2.5);
      window.llmlab.random = function () { return 0.999999; };   // the last rank: a token the page has no text for
      q('button[data-action="sample"]', root).click();
      out.samples = qa('.llmlab-sample', root).map(function (n) { return n.textContent; });
      out.note = q('.llmlab-samples .llmlab-note', root).textContent;
      setSlider(root, 'temperature', 1.0);
      out.after = qa('.llmlab-sample', root).length;
      out.afterText = q('.llmlab-samples', root).textContent;
    """)
    assert max(out["values"]) <= 1.0 and out["values"][0] == 1.0
    assert all(s.startswith("rare token, rank ") for s in out["samples"]), out["samples"]
    assert "whose text this page does not keep" in out["note"]
    assert out["after"] == 0 and out["afterText"].startswith('Press "draw 10 samples"')


def test_attention_thumbnails_are_labelled_with_the_layer_the_menu_names(tmp_path):
    view = AttentionView(TOKENS, attention_weights(layers=2), layer_labels=["block 3", "block 29"], live=False)
    path = view.save(tmp_path / "attention.html")
    out = run_in_page(path, PAGE_HELPERS + """
      var root = q('.llmlab-attention');
      choose(qa('select', root)[2], 1);                       // thumbnails: every layer
      out.labels = qa('.llmlab-thumb span', root).map(function (n) { return n.textContent; });
      out.key = q('.llmlab-token-key', root).textContent;
    """)
    assert out["labels"][:3] == ["B3 h0", "B3 h1", "B3 mean"] and "B29 h1" in out["labels"]
    assert "\u2423 is a space" in out["key"]


def test_lens_note_says_when_the_target_is_never_the_top_token(tmp_path):
    from llmlab.visualization import LensView

    top_tokens = [[["a", " sea"], ["b", " sea"]]] * 2
    probs = [[[0.6, 0.3], [0.5, 0.4]]] * 2
    view = LensView(["x", "y"], ["embed", "block 0"], top_tokens, probs, target=" sea",
                    target_rank=[[1, 2], [1, 1]], live=False)
    out = run_in_page(view.save(tmp_path / "lens.html"), PAGE_HELPERS + """
      out.note = q('.llmlab-lens .llmlab-note').textContent;
      out.underlined = qa('.llmlab-target').length;
    """)
    assert out["note"].startswith('"\u2423sea" is never the top token here (its best rank is 2)')
    assert out["underlined"] == 0


def test_similarity_view_centred_on_one_shows_uncapped_values(tmp_path):
    from llmlab.visualization import SimilarityView

    ratio = np.array([[1.0, 0.5], [1.73, 3.2]])
    view = SimilarityView(ratio, ["a", "b"], center=1.0, vmin=0.5, vmax=1.5, show_values=True)
    out = run_in_page(view.save(tmp_path / "sim.html"), PAGE_HELPERS + """
      out.text = qa('td.llmlab-cell').map(function (n) { return n.textContent; });
      out.bg = qa('td.llmlab-cell').map(function (n) { return n.style.background; });
      out.legend = q('.llmlab-legend').getAttribute('aria-label');
    """)
    assert out["text"] == ["1.00", "0.50", "1.73", "3.20"]
    assert out["bg"][0] == "rgba(31, 119, 180, 0)"              # 1 = no effect: no colour
    assert out["bg"][1] == "rgb(214, 39, 40)" and out["bg"][3] == "rgb(31, 119, 180)"   # saturated, uncapped text
    assert "from 0.5 (red) to 1.5 (blue)" in out["legend"]


def test_attention_readout_names_key_positions_so_a_repeated_token_is_unambiguous(tmp_path):
    # " the" twice: which one a query looks at is said by its position, not only by its text.
    tokens = ["The", " cat", " saw", " the", " dog", " and", " the"]
    T = len(tokens)
    w = np.full((1, 1, T, T), 0.01) * np.tril(np.ones((T, T)))
    w[0, 0, 6, 3] = 1.0                                           # the last " the" looks at the first " the"
    w = w / w.sum(-1, keepdims=True)
    view = AttentionView(tokens, w, live=False)
    out = run_in_page(view.save(tmp_path / "repeat.html"), PAGE_HELPERS + """
      var root = q('.llmlab-attention');
      fire(cell(root, 6, 3), 'mouseover');
      out.readout = readout(root);
    """)
    first, second = out["readout"].split("\n")[:2]
    assert first.endswith('"␣the" (position 6) → "␣the" (position 3): ' + f"{round(w[0, 0, 6, 3] * 255) / 255:.3f}"), first
    assert second.startswith('"␣the" (position 6) looks most at "␣the" (position 3): '), second


def test_readouts_grow_instead_of_cutting_wrapped_lines(tmp_path):
    long_tokens = [f"token_with_a_long_name_{i}" for i in range(len(TOKENS))]
    view = AttentionView(long_tokens, attention_weights(), live=False)
    out = run_in_page(view.save(tmp_path / "narrow.html"), PAGE_HELPERS + """
      var r = q('.llmlab-attention .llmlab-readout');
      out.fits = r.scrollHeight <= r.clientHeight + 1;
    """, width=420)
    assert out["fits"]


def test_special_tokens_without_an_underscore_and_refused_layers():
    from llmlab.visualization import show_token

    assert show_token("<filename>") == "\u27e8filename\u27e9" and show_token("<div>") == "<div>"
    with pytest.raises(ValueError, match="layers \\[30\\] do not exist: this model has 30 layers"):
        import llmlab

        model, tok = llmlab.load("smollm2-135m")
        AttentionView.from_model(model, tok, "Hello there", layers=[30])
