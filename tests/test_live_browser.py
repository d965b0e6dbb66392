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
from llmlab.inspection import capture, logit_lens
from llmlab.visualization import show_token_ids
from live_driver import Chromium, PageError, static_server

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "assets" / "vendor" / "live"
PROMPTS = ["The Eiffel Tower is in the city of", "今天天气很好，我们去公园"]


def make_site(folder: Path, body: str = "", preload: bool = True) -> Path:
    """A page at folder/page.html; preload=False leaves loading the live model to the views (as in the book)."""
    if not (VENDOR / "manifest.js").is_file():
        raise FileNotFoundError(f"{VENDOR} has no live model files: run `make live` first.")
    static = folder / "_static"
    shutil.copytree(ROOT / "assets" / "live", static / "live")
    (static / "vendor").mkdir(parents=True)
    (static / "vendor" / "live").symlink_to(VENDOR, target_is_directory=True)
    page = folder / "page.html"
    head = "<script src='_static/live/llmlab-live.js'></script>" if preload else ""
    # data-content_root: where Sphinx pages say their _static/ folder is (the views find it there)
    page.write_text("<!DOCTYPE html><html data-content_root='./'><head><meta charset='utf-8'>"
                    f"{head}</head><body>{body}</body></html>", encoding="utf-8")
    return page


@pytest.fixture(scope="module")
def smol():
    return llmlab.load("smollm2-135m", device="cpu")


def book_views(model, tokenizer) -> str:
    """The four kinds of live view, built at "build time" from llmlab, as a chapter builds them."""
    from llmlab.visualization import AttentionView, LensView, SamplingView, TokensView

    prompt = "The cat sat on the mat because it"
    with torch.no_grad():
        logits = model(torch.tensor([tokenizer.encode(prompt)]))[0, -1]
    views = [AttentionView.from_model(model, tokenizer, prompt, layer=5, head=6),
             LensView.from_model(model, tokenizer, prompt),
             SamplingView.from_logits([prompt], logits[None], tokenizer, n=15),
             TokensView.from_tokenizers(prompt, {"SmolLM2-135M": tokenizer})]
    return "".join(view.to_html() for view in views)


@pytest.fixture(scope="module", params=["file", "http"])
def page(request, tmp_path_factory, smol):
    site = tmp_path_factory.mktemp(f"live-{request.param}")
    page_path = make_site(site, book_views(*smol), preload=False)
    with Chromium(loopback=request.param == "http") as browser:
        if request.param == "file":
            opened = browser.open(page_path.as_uri())
            opened.evaluate("llmlab.loadLive(llmlab.staticRoot()).then(() => 1)")   # what "Run live" does first
            yield opened
        else:
            with static_server(site) as url:
                opened = browser.open(url + "page.html")
                opened.evaluate("llmlab.loadLive(llmlab.staticRoot()).then(() => 1)")
                yield opened


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


RUN_VIEW = """(async () => {
  const root = document.querySelector('div.llmlab-view.llmlab-%s');
  const before = root.querySelector('[data-live=yes]');
  if (before) before.removeAttribute('data-live');       // a view drawn by an earlier run
  root.querySelector('[data-name=live-prompt]').value = %s;
  root.querySelector('[data-action=run-live]').click();
  const start = performance.now();
  while (!root.querySelector('[data-live=yes]')) {
    const status = root.querySelector('.llmlab-live-status').textContent;
    if (performance.now() - start > 280000) throw new Error('no live view: ' + status);
    await new Promise(r => setTimeout(r, 100));
  }
  const view = root.querySelector('[data-live=yes]');
  return {status: root.querySelector('.llmlab-live-status').textContent,
          tokens: [...view.querySelectorAll('.llmlab-tokens .llmlab-tok')].map(s => s.firstChild.textContent),
          cells: [...view.querySelectorAll('td.llmlab-cell')].map(td => td.textContent),
          bars: [...view.querySelectorAll('.llmlab-bar-row')].map(r => [r.querySelector('.llmlab-bar-label').textContent,
                 parseFloat(r.querySelector('.llmlab-bar-value').textContent)]),
          ids: [...view.querySelectorAll('.llmlab-id')].map(s => parseInt(s.textContent, 10))};
})()"""


@pytest.mark.parametrize("prompt", PROMPTS)
def test_every_live_view_redraws_from_the_live_model(smol, page, prompt):
    model, tokenizer = smol
    ids = tokenizer.encode(prompt)
    shown = show_token_ids(tokenizer, ids)

    # the reader's settings carry over: block 12, head 3, and the temperature below
    page.evaluate("""(() => { const root = document.querySelector('div.llmlab-view.llmlab-attention');
      const [layer, head] = root.querySelectorAll('.llmlab-controls select');
      layer.value = String([...layer.options].findIndex(o => o.text === 'block 12'));
      layer.dispatchEvent(new Event('change')); head.value = '3'; head.dispatchEvent(new Event('change'));
      const t = document.querySelector('div.llmlab-view.llmlab-sampling input[data-name=temperature]');
      t.value = '0.7'; t.dispatchEvent(new Event('input')); return 1; })()""")
    attention = page.evaluate(RUN_VIEW % ("attention", json.dumps(prompt)), timeout=300)
    settings = page.evaluate("[...document.querySelectorAll('div.llmlab-view.llmlab-attention [data-live=yes] "
                             ".llmlab-controls select')].slice(0, 2).map(s => s.options[s.selectedIndex].text)")
    assert settings == ["block 12", "head 3"]
    assert attention["tokens"] == shown
    assert len(attention["cells"]) == len(ids) ** 2
    assert f"({len(ids)} tokens)" in attention["status"]

    tokens = page.evaluate(RUN_VIEW % ("tokens", json.dumps(prompt)), timeout=300)
    assert tokens["ids"] == ids
    assert tokens["tokens"] == shown

    lens = page.evaluate(RUN_VIEW % ("lens", json.dumps(prompt)), timeout=300)
    expected = logit_lens(model, tokenizer, prompt, k=1, positions=[-1])
    assert lens["cells"] == [show_token_ids(tokenizer, [row[0][0]])[0] for row in expected.top_ids.tolist()]

    sampling = page.evaluate(RUN_VIEW % ("sampling", json.dumps(prompt)), timeout=300)
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor([ids]))[0, -1] / 0.7, -1)    # at the reader's temperature
    top = torch.topk(probs, 15)
    assert [label for label, _ in sampling["bars"][:15]] == show_token_ids(tokenizer, top.indices)
    assert np.abs(np.array([p for _, p in sampling["bars"][:15]]) - top.values.numpy()).max() <= 0.0005 + 1e-4
    assert sampling["bars"][15][0] == f"all other {model.config.vocab_size - 15:,} tokens"
