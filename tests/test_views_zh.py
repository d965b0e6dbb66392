"""The views speak the page's language: on a page of the Chinese edition (<html lang="zh-CN">) every
label, button, hint, readout and message of a view and of the live model's page controls is Chinese;
on an English page (or a page without lang, as in Jupyter) it is the English of today, byte for byte.

Two kinds of check: a static scan of the views' JavaScript (every text a reader sees goes through the
lookup L.t and has a Chinese entry in zh.js, with the same {placeholders}), and headless Chromium on
the same views in an English and a Chinese page."""
import html as _html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from browser import open_in_browser
from jsstrings import lookups, table, tokens
from llmlab.visualization import (
    AttentionView, BPEMergeView, LensView, SamplingView, SimilarityView, TokensView, WriteView, mask_view, save_page,
)

ASSETS = Path(__file__).resolve().parents[1] / "llmlab" / "visualization" / "assets"
VIEW_JS = sorted(p for p in ASSETS.glob("*.js") if p.name != "zh.js")
ZH = table((ASSETS / "zh.js").read_text(encoding="utf-8"))
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")

# Literals that look like text but are no reader-facing words, each with its reason.
NOT_SHOWN = {
    "attention.js": {"B": "thumbnail prefix of a block number (B29), as the book's figures write it",
                     "block ": "the layer names of the live data (shown through L.layerName)",
                     ", max-content)": "CSS"},
    "lens.js": {"block ": "the layer names of the live data (shown through L.layerName)",
                ", p = ": "a formula (p = 0.0123), the same in both languages"},
    "write.js": {" ms": "a unit"},
    "common.js": {"Enter": "a key name", "Escape": "a key name",
                  # model inputs: the text the live model continues stays as in the English book
                  "What is the capital of France?": "a model input",
                  "Once upon a time": "a model input",
                  "My favourite place to spend the day is": "a model input",
                  "I walked along the beach\nThe waves of the ocean\nA ship sailed on the sea": "a model input",
                  "I walked along the road\nThe streets of the city\nA car drove on the highway": "a model input"},
}
# Entries whose Chinese is the English (identifiers only)
SAME_IN_BOTH = {"id {id}"}


def looks_like_words(text: str) -> bool:
    """A literal a reader could see: letters, and either a space or a capital (CSS classes, selectors and
    gradients are not)."""
    if re.match(r"^ ?\.?llmlab-|^linear-gradient\(", text):
        return False
    return bool(re.search(r"[A-Za-z]", text)) and (" " in text or text[:1].isupper())


def placeholders(text: str) -> set:
    return set(re.findall(r"\{(\w+)\}", text))


def all_lookups():
    keys = {}
    for path in VIEW_JS:
        for key in lookups(path.read_text(encoding="utf-8"))[0]:
            keys.setdefault(key, path.name)
    return keys


def test_scanner_finds_unwrapped_text_and_lookups():
    """The scan itself: it sees a bare string, a wrapped one (also joined with +) and skips regexes."""
    source = ("var a = L.t('Run live'), b = 'Stop here', c = /it's/.test(x), d = L.t('one ' +\n  'two', {n: 1});\n"
              "// 'a comment'\nvar e = 'llmlab-note';")
    keys, used = lookups(source)
    assert set(keys) == {"Run live", "one two"}
    bare = [t for kind, t, off in tokens(source) if kind == "str" and off not in used and looks_like_words(t)]
    assert bare == ["Stop here"]


@pytest.mark.parametrize("path", VIEW_JS, ids=lambda p: p.name)
def test_every_visible_literal_goes_through_the_lookup(path):
    source = path.read_text(encoding="utf-8")
    keys, used = lookups(source)
    allowed = NOT_SHOWN.get(path.name, {})
    bare = sorted({t for kind, t, off in tokens(source)
                   if kind == "str" and off not in used and looks_like_words(t) and t not in allowed})
    assert bare == [], (f"{path.name} shows text that does not go through L.t (so it stays English on the Chinese "
                        f"pages): {bare}. Wrap each in L.t('...') and add its Chinese to zh.js, or, if a reader never "
                        f"sees it, add it to NOT_SHOWN with the reason.")


def test_every_lookup_has_a_chinese_entry_with_the_same_placeholders():
    keys = all_lookups()
    missing = sorted(k for k in keys if k not in ZH)
    assert missing == [], f"texts passed to L.t without an entry in zh.js: {missing}"
    unused = sorted(k for k in ZH if k not in keys)
    assert unused == [], f"entries of zh.js that no view uses any more (remove them): {unused}"
    for key, zh in ZH.items():
        assert placeholders(zh) == placeholders(key), (
            f"zh.js: {json.dumps(key)} has placeholders {sorted(placeholders(key))} but its Chinese "
            f"{json.dumps(zh, ensure_ascii=False)} has {sorted(placeholders(zh))}")
        if key not in SAME_IN_BOTH and re.search(r"[A-Za-z]{2}", key.replace("{", " {")):
            assert CJK.search(zh), f"zh.js: the entry for {json.dumps(key)} is not Chinese: {zh!r}"


def test_the_glossary_terms_are_used():
    """One term, one translation: the views say 词元, 块, 温度, 消融 ... as the glossary does."""
    text = "".join(ZH.values())
    for term in ("词元", "块", "注意力头", "温度", "消融", "引导向量", "注意力汇聚点", "logit 透镜", "查询", "掩码"):
        assert term in text, term
    assert "令牌" not in text and "标记" not in text          # other translations of "token"


# ---------------------------------------------------------------- the views in a browser
TOKENS = ["A", "B", "C", "D", "E"]


def attention_weights(layers=2, heads=9, T=len(TOKENS)):
    rng = np.random.default_rng(0)
    w = rng.random((layers, heads, T, T)) * np.tril(np.ones((T, T)))
    return w / w.sum(-1, keepdims=True)


def views():
    lens_probs = np.full((2, 3, 2), 0.4)
    return [
        AttentionView(TOKENS, attention_weights(), live=True),          # with the "Run live" box and knock-outs
        SamplingView(["p"], [["a", "b", "c"]], np.array([[2.0, 1.0, 0.0]]), live=True),
        LensView(["x", "y", "z"], ["embed", "block 0"], [[["a", "b"]] * 3] * 2, lens_probs, target="a",
                 target_rank=[[0, 1, 2], [1, 1, 1]], live=True, live_steer=(np.zeros(576), 3, 4.0)),
        TokensView([("x", 1), ("y", 2)], live=False),
        BPEMergeView.from_text("abab abab", 2),
        mask_view({"causal": np.tril(np.ones((4, 4)))}),
        SimilarityView(np.eye(2), ["u", "v"], ["u", "v"]),
        WriteView("write"), WriteView("chat"), WriteView("cache"),
    ]


# What a reader sees: text nodes and the labels a screen reader speaks, after hovering a cell of each grid
# and a token, pinning a cell, and drawing samples.
READ = """
var L = window.llmlab, out = {text: [], attrs: []};
var seed = 1; L.random = function () { seed = (seed * 16807) % 2147483647; return seed / 2147483647; };
function fire(node, type) { node.dispatchEvent(new MouseEvent(type, {bubbles: true})); }
Array.prototype.forEach.call(document.querySelectorAll('td.llmlab-cell'),
                             function (td, k) { if (k % 7 === 0) fire(td, 'click'); });
Array.prototype.forEach.call(document.querySelectorAll('.llmlab-tokens .llmlab-tok'), function (s) { fire(s, 'mouseover'); });
Array.prototype.forEach.call(document.querySelectorAll('button[data-action=sample], button[data-action=next]'),
                             function (b) { fire(b, 'click'); });
var ablate = document.querySelector('button[data-action=ablate]');
if (ablate) { document.querySelector('[data-name=ablate-heads]').value = 'x'; fire(ablate, 'click'); }
var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
while (walker.nextNode()) {
  var node = walker.currentNode, parent = node.parentNode;
  if (parent.closest('script, style, .llmlab-tok, .llmlab-bar-label, .llmlab-sample, option') || !node.textContent.trim()) continue;
  out.text.push(node.textContent);
}
Array.prototype.forEach.call(document.querySelectorAll('.llmlab-view *'), function (n) {
  ['aria-label', 'title', 'placeholder'].forEach(function (a) { if (n.getAttribute(a)) out.attrs.push(n.getAttribute(a)); });
  if (n.tagName === 'OPTION') out.text.push(n.textContent);
});
out.lang = L.lang();
document.body.setAttribute('data-out', JSON.stringify(out));
"""


def read_page(tmp_path, lang):
    """The views on one page with <html lang=...> (None: no lang, as a Jupyter output), as the built book
    serves them (the meta names the live model's folder, so the live boxes appear; nothing is loaded)."""
    name = f"views-{lang or 'none'}"
    path = save_page(views(), tmp_path / f"{name}.html")
    page = path.read_text(encoding="utf-8")
    page = page.replace('<html lang="en">', f'<html lang="{lang}">' if lang else "<html>", 1)
    page = page.replace("<head>", '<head>\n<meta name="llmlab-live-static" content="_static/">', 1)
    path.write_text(page, encoding="utf-8")
    result = open_in_browser(path, js=READ, width=1000, height=700)
    assert result.errors == [], result.errors
    match = re.search(r'<body[^>]*\sdata-out="([^"]*)"', result.dom)
    assert match, "the page's script did not finish: " + result.dom[-400:]
    return json.loads(_html.unescape(match.group(1)))


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("views_zh")
    return {lang: read_page(tmp, lang) for lang in ("zh-CN", "en", None)}


def test_english_pages_show_todays_english(pages):
    en, plain = pages["en"], pages[None]
    assert en["lang"] == "en" and plain["lang"] == "en"
    assert en == plain                                   # Jupyter (no lang) and the English book: the same
    shown = "\n".join(en["text"] + en["attrs"])
    for text in ("Run live", "back to the book's view", "mean of heads", "block 1", "head 8",
                 "Knock out and compare", "Write each head as block.head, e.g. 5.6; got \"x\".",
                 "draw 10 samples", "10 samples at temperature", "looks most at", "top-1 probability",
                 "Steer the live model: add a direction and let it write", "Write", "Ask", "Stop",
                 "Write with and without the cache", "merges learned so far:", "may attend (score kept)",
                 "\" vs \"", "In tokens:", "show ids", "temperature", "off"):
        assert text in shown, text
    assert not CJK.search(shown)


def test_chinese_pages_show_chinese_controls(pages):
    zh = pages["zh-CN"]
    assert zh["lang"] == "zh"
    shown = "\n".join(zh["text"] + zh["attrs"])
    for text in ("实时运行", "回到书中的视图", "各头平均", "块 1", "头 8", "消融并比较",
                 "每个头请写成 块.头 的形式，例如 5.6；收到的是 \"x\"。", "抽 10 个样本", "最关注",
                 "引导实时模型", "续写", "提问", "停止", "分别用和不用 KV 缓存生成", "目前学到的合并规则：",
                 "可以关注（保留分数）", "\" 与 \"", "词元中的符号：", "显示 id", "温度", "关闭", "嵌入层"):
        assert text in shown, text
    # the same number of texts as on the English page, and none of them is English prose any more
    assert len(zh["text"]) == len(pages["en"]["text"]) and len(zh["attrs"]) == len(pages["en"]["attrs"])
    names = re.compile(r"SmolLM2-135M|WebAssembly|logit lens|llmlab\.\w+(\.\w+)*")    # names kept in English
    english = [t for t in zh["text"] + zh["attrs"] if re.search(r"[A-Za-z]{3,}[ ,.:;]+[A-Za-z]{3,}", names.sub("", t))]
    assert english == [], english


# ---------------------------------------------------------------- the live model's errors
LIVE_JS = Path(__file__).resolve().parents[1] / "assets" / "live" / "llmlab-live.js"
# (a message as llmlab-live.js writes it, a piece of its source that writes it, the Chinese it must contain)
LIVE_ERRORS = [
    ("Could not load http://h/_static/vendor/live/manifest.js. The live model's files are written by `make book` "
     "(Makefile target `live`) into _static/vendor/live/; is this a complete build of the book?",
     "The live model's files are written by `make book`", "无法加载 http://h/_static/vendor/live/manifest.js"),
    ("HTTP 404 for http://h/model.onnx", '"HTTP " + response.status + " for "', "HTTP 404"),
    ('The prompt is empty: type some text, e.g. llmlabLive.run("The capital of France is").',
     "The prompt is empty: type some text, e.g. llmlabLive.", "提示词为空"),
    ('The prompt "\\u200b" gives no tokens; type some text.', '" gives no tokens; type some text."', "没有产生任何词元"),
    ("The prompt is 300 tokens long; llmlabLive.run (what the views call) reads at most 256. Shorten it.",
     "llmlabLive.run (what the views call) reads at most %d", "最多读取 256 个词元"),
    ("The prompt is 1000 tokens long; with maxNewTokens = 60, generate takes at most 964 (the live model holds 1024 "
     "tokens in all, the chat template included). Shorten it.", ", the chat template included", "含对话模板"),
    ("The prompt is 1000 tokens long; with maxNewTokens = 60, generate takes at most 964 (the live model holds 1024 "
     "tokens in all). Shorten it.", '"(the live model holds " + d.context + " tokens in all"', "请缩短提示词"),
    ("maxNewTokens is 2000; the live model holds 1024 tokens in all (prompt + new ones). Ask for fewer.",
     '" tokens in all (prompt + new ones). Ask for fewer."', "请减少要生成的词元数"),
    ("layer must be an integer from 0 to 29 (numbered from 0 like llmlab); got 31.",
     '" (numbered from 0 like llmlab); got "', "layer 必须是 0 到 29 之间的整数"),
    ("temperature must be a finite number from 0 to 100; got -1. 0 means greedy (always the top token); 1 samples "
     "the model's own distribution.", '" must be a finite number from "', "temperature 必须是 0 到 100 之间的有限数；收到的是 -1。"),
    ("ablate: there is no head [30, 1]; SmolLM2-135M has blocks 0 to 29 and heads 0 to 8 in each.",
     '"ablate: there is no head ["', "没有注意力头 [30, 1]"),
    ("steer.scale must be a finite number (0 changes nothing, negative pushes the other way); got NaN.",
     "steer.scale must be a finite number (0 changes nothing, negative pushes the other way); got ", "收到的是 NaN"),
    ("steeringVector(positive, negative, layer) takes two non-empty lists of prompts; the first is an array of 0.",
     "takes two non-empty lists of prompts; the ", "第一组（“具有”）是空的"),
    ("steeringVector(positive, negative, layer) takes two non-empty lists of prompts; the second is an array of 0.",
     '(k ? "second" : "first")', "第二组（“不具有”）是空的"),
]


def test_the_live_errors_that_the_tests_translate_are_the_ones_the_live_model_writes():
    # the runtime is one file per role (llmlab-live.js, worker.js, tokenizer.js, ...): any of them may write it
    source = "\n".join(p.read_text(encoding="utf-8") for p in sorted(LIVE_JS.parent.glob("*.js")))
    for message, piece, _ in LIVE_ERRORS:
        assert piece in source, f"the live runtime no longer writes {message!r}: update LIVE_ERRORS and zh.js's ZH_ERRORS"


def test_live_errors_read_in_chinese_on_a_chinese_page_and_unchanged_on_an_english_one(tmp_path):
    messages = [m for m, _, _ in LIVE_ERRORS] + ["some message no pattern knows"]
    js = ("var out = {};" + "".join(
        f"document.documentElement.setAttribute('lang', '{lang}');"
        f"out['{lang}'] = {json.dumps(messages)}.map(function (m) {{ return window.llmlab.message(new Error(m)); }});"
        for lang in ("zh-CN", "en")) + "document.body.setAttribute('data-out', JSON.stringify(out));")
    path = save_page([mask_view({"causal": np.tril(np.ones((2, 2)))})], tmp_path / "errors.html")
    result = open_in_browser(path, js=js)
    assert result.errors == [], result.errors
    out = json.loads(_html.unescape(re.search(r'<body[^>]*\sdata-out="([^"]*)"', result.dom).group(1)))
    assert out["en"] == messages                                   # English pages: the message itself
    for (message, _, chinese), shown in zip(LIVE_ERRORS, out["zh-CN"]):
        assert chinese in shown, (message, shown)
        # what was given and the limits survive: every number of the English message is in the Chinese
        given = set(re.findall(r"\d+", message.replace("an array of 0", "")))     # (an empty list reads 空)
        assert given <= set(re.findall(r"\d+", shown)), (message, shown)
    assert out["zh-CN"][-1] == "some message no pattern knows"     # an unknown message is shown as it is
