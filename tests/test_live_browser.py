"""The live model in headless Chromium, from file:// and from a local web server, against llmlab in Python.

The page is a small site laid out like the built book (_static/live/ for the page code,
_static/vendor/live/ for the files `make live` writes), so the same relative paths are exercised.
One browser per way of opening the page; the model loads once in each.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import llmlab
from llmlab.inspection.capture import capture
from llmlab.inspection.lens import logit_lens
from llmlab.visualization import show_token_ids
from live_driver import Chromium, PageError, static_server

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "assets" / "vendor" / "live"
PROMPTS = ["The Eiffel Tower is in the city of", "今天天气很好，我们去公园"]


def make_site(folder: Path, body: str = "") -> Path:
    if not (VENDOR / "manifest.js").is_file():
        raise FileNotFoundError(f"{VENDOR} has no live model files: run `make live` first.")
    static = folder / "_static"
    shutil.copytree(ROOT / "assets" / "live", static / "live")
    (static / "vendor").mkdir(parents=True)
    (static / "vendor" / "live").symlink_to(VENDOR, target_is_directory=True)
    page = folder / "page.html"
    page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'>"
                    "<script src='_static/live/llmlab-live.js'></script></head>"
                    f"<body>{body}</body></html>", encoding="utf-8")
    return page


@pytest.fixture(scope="module")
def smol():
    return llmlab.load("smollm2-135m", device="cpu")


@pytest.fixture(scope="module", params=["file", "http"])
def page(request, tmp_path_factory):
    site = tmp_path_factory.mktemp(f"live-{request.param}")
    page_path = make_site(site)
    with Chromium(loopback=request.param == "http") as browser:
        if request.param == "file":
            yield browser.open(page_path.as_uri())
        else:
            with static_server(site) as url:
                yield browser.open(url + "page.html")


RUN = """llmlabLive.run(%s).then(r => ({ids: r.ids, tokens: r.tokens, next: r.next, lens: r.lens,
          L: r.nLayers, H: r.nHeads, att: [r.attention(0, 0), r.attention(%d, %d)]}))"""


@pytest.mark.parametrize("prompt", PROMPTS)
def test_live_model_gives_llmlab_numbers(smol, page, prompt):
    model, tokenizer = smol
    layer, head = 5, 6
    out = page.evaluate(RUN % (json.dumps(prompt), layer, head), timeout=300)

    ids = tokenizer.encode(prompt)
    assert out["ids"] == ids
    assert out["tokens"] == show_token_ids(tokenizer, ids)

    logits, cache = capture(model, tokenizer, prompt, names=["*hook_pattern"])
    probs = torch.softmax(logits[0, -1].float(), -1)
    expected = torch.topk(probs, 20)
    assert [n["id"] for n in out["next"]] == expected.indices.tolist()
    assert np.abs(np.array([n["p"] for n in out["next"]]) - expected.values.numpy()).max() < 1e-4
    assert [n["token"] for n in out["next"]] == show_token_ids(tokenizer, expected.indices)

    T = len(ids)
    for got, (l, h) in zip(out["att"], [(0, 0), (layer, head)]):
        want = cache[f"blocks.{l}.attn.hook_pattern"][0, h].numpy()      # (T, T)
        assert np.array(got).shape == (T, T)
        assert np.abs(np.array(got) - want).max() < 1e-4
        assert np.allclose(np.array(got).sum(-1), 1, atol=1e-5)

    lens = logit_lens(model, tokenizer, prompt, k=5, positions=[-1])
    assert len(out["lens"]) == model.config.n_layers + 1
    assert [[c["id"] for c in row] for row in out["lens"]] == lens.top_ids[:, 0].tolist()
    assert np.abs(np.array([[c["p"] for c in row] for row in out["lens"]]) - lens.top_probs[:, 0].numpy()).max() < 1e-4


@pytest.mark.parametrize("call, message", [
    ("llmlabLive.run('')", "The prompt is empty"),
    ("llmlabLive.run(42)", "takes a string; got number"),
    ("llmlabLive.run('word '.repeat(200))", "the live model takes at most 128"),
    ("llmlabLive.run('Hi').then(r => r.attention(30, 0))", "layer must be an integer from 0 to 29"),
    ("llmlabLive.run('Hi').then(r => r.attention(0, 9))", "head must be an integer from 0 to 8"),
    ("llmlabLive.run('Hi').then(r => r.attention(-1, 0))", "got -1"),
])
def test_live_model_rejects_bad_input(page, call, message):
    with pytest.raises(PageError, match=message):
        page.evaluate(call, timeout=300)


def test_tokenizer_matches_llmlab_on_hard_text(smol, page):
    """Digits, spaces, newlines, emoji, a special token, Chinese and byte fragments: same ids, same display."""
    _, tokenizer = smol
    text = "x 2024  ok\n\n\tTabs, 'quotes' and émojis 🙂; <|im_start|>user 天气很好！龘"
    out = page.evaluate(f"llmlabLive.run({json.dumps(text)}).then(r => [r.ids, r.tokens])", timeout=300)
    ids = tokenizer.encode(text)
    assert out[0] == ids
    assert out[1] == show_token_ids(tokenizer, ids)
    assert any(t.startswith("<") and t.endswith(">") and len(t) == 4 for t in out[1])   # a byte piece, e.g. <e9>
    assert "\u27e8im_start\u27e9" in out[1]
