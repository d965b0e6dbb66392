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
        row_sums = np.array(got, dtype=np.float32).sum(-1)    # a distribution, up to rounding over T keys
        llmlab.assert_same_up_to_rounding(row_sums, np.ones_like(row_sums), depth=T)

    lens = logit_lens(model, tokenizer, prompt, k=5, positions=[-1])
    assert len(out["lens"]) == model.config.n_layers + 1
    assert [[c["id"] for c in row] for row in out["lens"]] == lens.top_ids[:, 0].tolist()
    assert np.abs(np.array([[c["p"] for c in row] for row in out["lens"]]) - lens.top_probs[:, 0].numpy()).max() < 1e-4


@pytest.mark.parametrize("call, message", [
    ("llmlabLive.run('')", "The prompt is empty"),
    ("llmlabLive.run(42)", "takes a string; got number"),
    ("llmlabLive.run('word '.repeat(300))", r"The prompt is 301 tokens long; llmlabLive.run \(what the views call\) reads at most 256"),
    ("llmlabLive.run('Hi').then(r => r.attention(30, 0))", "layer must be an integer from 0 to 29"),
    ("llmlabLive.run('Hi').then(r => r.attention(0, 9))", "head must be an integer from 0 to 8"),
    ("llmlabLive.run('Hi').then(r => r.attention(-1, 0))", "got -1"),
    ("llmlabLive.run('Hi', {ablate: [[30, 0]]})", r"no head \[30, 0\]; SmolLM2-135M has blocks 0 to 29 and heads 0 to 8"),
    ("llmlabLive.run('Hi', {ablate: [[2, 9]]})", r"no head \[2, 9\]"),
    ("llmlabLive.run('Hi', {ablate: [5, 6]})", "list of \\[layer, head\\] pairs"),
    ("llmlabLive.run('Hi', {steer: {layer: 3, vector: [1, 2, 3], scale: 2}})", "has 3 numbers; the residual stream .* has 576"),
    ("llmlabLive.run('Hi', {steer: {layer: 3, vector: new Array(576).fill(0), scale: NaN}})", r"steer.scale must be a finite number .*; got NaN"),
    ("llmlabLive.run('Hi', {steer: {layer: 3, vector: new Array(576).fill(0), scale: Infinity}})", "got Infinity"),
    ("llmlabLive.run('Hi', {steer: {layer: 40, vector: new Array(576).fill(0)}})", "steer.layer .* from 0 to 29.*got 40"),
    ("llmlabLive.run('Hi', {resid: 30})", "resid .* from 0 to 29"),
    ("llmlabLive.run('Hi', {lensPositions: [5]})", "no position 5; the prompt has 1 tokens"),
    ("llmlabLive.run('Hi', {colour: 1})", "no option \"colour\""),
    ("llmlabLive.generate('')", "The prompt is empty"),
    ("llmlabLive.generate('Hi', {maxNewTokens: 0})", "maxNewTokens must be a whole number .* got 0"),
    ("llmlabLive.generate('Hi', {maxNewTokens: 5000})", "holds 1024 tokens in all"),
    ("llmlabLive.generate('word '.repeat(1000), {maxNewTokens: 100})", "The prompt is 1001 tokens long; with maxNewTokens = 100, generate takes at most 924"),
    ("llmlabLive.generate('Hi', {temperature: -1})", "temperature must be a finite number from 0 to 100; got -1"),
    ("llmlabLive.generate('Hi', {topP: 0})", "topP must be above 0"),
    ("llmlabLive.generate('Hi', {topK: 2.5})", "topK must be a whole number"),
    ("llmlabLive.generate('Hi', {signal: 3})", "signal must be an AbortSignal"),
])
def test_live_model_rejects_bad_input(page, call, message):
    with pytest.raises(PageError, match=message):
        page.evaluate(call, timeout=300)


GENERATE = """llmlabLive.generate(%s, %s).then(g => ({ids: g.ids, text: g.text, stopped: g.stopped, steps: g.steps.length,
                                                 timings: g.timings, promptIds: g.promptIds}))"""


@pytest.mark.parametrize("prompt", ["The capital of France is", "def fibonacci(n):"])
def test_greedy_generation_writes_llmlab_generate_tokens(smol, page, prompt):
    model, tokenizer = smol
    ids = tokenizer.encode(prompt)
    out = page.evaluate(GENERATE % (json.dumps(prompt), "{maxNewTokens: 12}"), timeout=300)
    want = llmlab.generate(model, torch.tensor([ids]), max_new_tokens=12, eos_token_id=0)[0, len(ids):].tolist()
    assert out["promptIds"] == ids
    assert out["ids"] == want
    assert out["text"] == tokenizer.decode([i for i in want if i != 0])
    assert out["steps"] == len(want) - 1                  # one cached decode step per token after the first
    assert out["timings"]["prefill_ms"] > 0 and out["timings"]["ms_per_token"] > 0


def test_greedy_without_the_cache_writes_the_same_tokens(page):
    with_cache = page.evaluate(GENERATE % ('"The capital of France is"', "{maxNewTokens: 6}"), timeout=300)
    without = page.evaluate(GENERATE % ('"The capital of France is"', "{maxNewTokens: 6, cache: false}"), timeout=300)
    assert with_cache["ids"] == without["ids"]


def test_sampling_keeps_only_tokens_the_filters_allow(smol, page):
    from llmlab.sampling import min_p_filter, top_k_filter, top_p_filter

    model, tokenizer = smol
    prompt, options = "Once upon a time", "{maxNewTokens: 10, temperature: 0.9, topK: 20, topP: 0.8, minP: 0.05, seed: 7}"
    out = page.evaluate(GENERATE % (json.dumps(prompt), options), timeout=300)
    again = page.evaluate(GENERATE % (json.dumps(prompt), options), timeout=300)
    assert again["ids"] == out["ids"] and again["text"] == out["text"]          # the same seed, the same text
    ids = tokenizer.encode(prompt)
    with torch.no_grad():
        for token in out["ids"]:
            logits = model(torch.tensor([ids]))[0, -1:].float()
            allowed = min_p_filter(top_p_filter(top_k_filter(logits / 0.9, 20), 0.8), 0.05)[0]
            kept = torch.isfinite(allowed)
            assert kept[token], f"token {token} is outside the {int(kept.sum())} tokens the filters allow"
            ids.append(token)


def test_a_stopped_generation_ends_early(page):
    out = page.evaluate("""(async () => {
      const stop = new AbortController(), seen = [];
      const g = await llmlabLive.generate('Once upon a time', {maxNewTokens: 200, temperature: 1, seed: 1,
        signal: stop.signal, onToken: t => { seen.push(t.text); if (seen.length === 3) stop.abort(); }});
      return {stopped: g.stopped, n: g.ids.length, seen: seen.length};
    })()""", timeout=300)
    assert out["stopped"] == "aborted"
    assert 3 <= out["n"] <= 5 and out["n"] == out["seen"]


def test_stop_strings_and_chat(page):
    out = page.evaluate(GENERATE % ('"The capital of France is"', "{maxNewTokens: 12, stop: '.'}"), timeout=300)
    assert out["stopped"] == "stop" and "." not in out["text"] and out["text"].strip()
    chat = page.evaluate(GENERATE % ('"What is the capital of France?"', "{maxNewTokens: 40, chat: true}"), timeout=300)
    assert "Paris" in chat["text"]
    assert chat["promptIds"][:1] == [1]                    # <|im_start|>system ...


def test_knock_outs_and_steering_give_llmlab_numbers(smol, page):
    from llmlab.hooks import hook_name
    from llmlab.inspection.capture import hooks
    from llmlab.inspection.steering import steer

    model, tokenizer = smol
    prompt = "The Eiffel Tower is in the city of"
    ids = tokenizer.encode(prompt)

    def zero(head):
        def fn(z):
            z = z.clone()
            z[:, :, head] = 0.0
            return z
        return fn
    with torch.no_grad(), hooks(model, {hook_name(0, "attn.z"): zero(3), hook_name(7, "attn.z"): zero(8)}):
        want = torch.softmax(model(torch.tensor([ids]))[0, -1], -1)
    got = page.evaluate(f"llmlabLive.run({json.dumps(prompt)}, {{ablate: [[0, 3], [7, 8]]}}).then(r => r.next)", timeout=300)
    assert [n["id"] for n in got[:10]] == torch.topk(want, 10).indices.tolist()
    assert np.abs(np.array([n["p"] for n in got[:10]]) - torch.topk(want, 10).values.numpy()).max() < 1e-4

    # a direction from the page's own difference of means, then the steered run and generation
    vector = page.evaluate("llmlabLive.steeringVector(['I love it', 'What a joy'], ['I hate it', 'What a pain'], 10)"
                           ".then(v => (window.v = v, v))", timeout=300)
    from llmlab.inspection.steering import steering_vector
    expected = steering_vector(model, tokenizer, ["I love it", "What a joy"], ["I hate it", "What a pain"], 10)
    assert np.abs(np.array(vector) - expected.numpy()).max() < 1e-2 * expected.abs().max().item()
    v = torch.tensor(vector, dtype=torch.float32)
    with torch.no_grad(), steer(model, v, 10, 4.0):
        want = torch.softmax(model(torch.tensor([tokenizer.encode("Today I feel")]))[0, -1], -1)
        steered = llmlab.generate(model, torch.tensor([tokenizer.encode("Today I feel")]), max_new_tokens=8, eos_token_id=0)
    got = page.evaluate("llmlabLive.run('Today I feel', {steer: {layer: 10, vector: window.v, scale: 4}, resid: 10})"
                        ".then(r => [r.next, r.resid.length])", timeout=300)
    assert got[1] == 576
    assert [n["id"] for n in got[0][:10]] == torch.topk(want, 10).indices.tolist()
    assert np.abs(np.array([n["p"] for n in got[0][:10]]) - torch.topk(want, 10).values.numpy()).max() < 1e-4
    text = page.evaluate("llmlabLive.generate('Today I feel', {maxNewTokens: 8, steer: {layer: 10, vector: window.v, "
                         "scale: 4}}).then(g => g.ids)", timeout=300)
    assert text == steered[0, len(tokenizer.encode("Today I feel")):].tolist()


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
    readable = page.evaluate(f"llmlab.readableTokens({json.dumps(shown)})")   # byte pieces named by their character
    assert attention["tokens"] == readable
    assert (readable == shown) == (not any("<" in t for t in shown)) and not any("<" in t for t in readable)
    assert len(attention["cells"]) == len(ids) ** 2
    assert f"({len(ids)} tokens)" in attention["status"]

    tokens = page.evaluate(RUN_VIEW % ("tokens", json.dumps(prompt)), timeout=300)
    assert tokens["ids"] == ids
    assert tokens["tokens"] == shown

    lens = page.evaluate(RUN_VIEW % ("lens", json.dumps(prompt)), timeout=300)
    last = list(range(max(0, len(ids) - 8), len(ids)))             # the book's grid: the last 8 positions
    expected = logit_lens(model, tokenizer, prompt, k=1, positions=last)
    assert lens["cells"] == [show_token_ids(tokenizer, [cell[0]])[0] for row in expected.top_ids.tolist() for cell in row]

    sampling = page.evaluate(RUN_VIEW % ("sampling", json.dumps(prompt)), timeout=300)
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor([ids]))[0, -1] / 0.7, -1)    # at the reader's temperature
    top = torch.topk(probs, 15)
    assert [label for label, _ in sampling["bars"][:15]] == show_token_ids(tokenizer, top.indices)
    assert np.abs(np.array([p for _, p in sampling["bars"][:15]]) - top.values.numpy()).max() <= 0.0005 + 1e-4
    assert sampling["bars"][15][0] == f"all other {model.config.vocab_size - 15:,} tokens"


# ---------------------------------------------------------------- the views as a reader sees them (no model)

def open_static(tmp_path, body: str):
    """A page like the book's with `body`, opened from file:// (the live model is never loaded)."""
    browser = Chromium()
    page = browser.open(make_site(tmp_path, body, preload=False).as_uri())
    return browser, page


def test_hiding_the_sink_reads_rows_stored_without_it(tmp_path):
    from llmlab.visualization import AttentionView

    # the first token takes 99.9%: stored to 1/255, the rest of the row would round to zero
    w = np.array([[1, 0, 0], [0.999, 0.001, 0], [0.999, 0.0004, 0.0006]], np.float32)[None, None]
    view = AttentionView(["A", "B", "C"], w, live=False)
    browser, page = open_static(tmp_path, view.to_html())
    try:
        labels = page.evaluate("""(() => { const box = document.querySelector('input[data-name=hide-sink]');
          box.checked = true; box.dispatchEvent(new Event('change'));
          return [...document.querySelectorAll('td.llmlab-cell')].map(td => td.getAttribute('aria-label')); })()""")
    finally:
        browser.close()
    values = np.array([float(label.rsplit(": ", 1)[1]) for label in labels]).reshape(3, 3)
    assert np.abs(values[1] - [0, 1, 0]).max() < 0.005
    assert np.abs(values[2] - [0, 0.4, 0.6]).max() < 0.005


def test_a_tokens_view_opens_with_its_own_text(tmp_path, smol):
    from llmlab.visualization import TokensView

    _, tokenizer = smol
    text = "print(len('héllo'))"
    view = TokensView.from_tokenizers(text, {"SmolLM2-135M": tokenizer})
    assert view.data["live"]["prompt"] == text
    browser, page = open_static(tmp_path, view.to_html())
    try:
        shown = page.evaluate("document.querySelector('[data-name=live-prompt]').value")
    finally:
        browser.close()
    assert shown == text                    # not ")" (the last token), as a loop variable once made it


def test_a_steered_lens_view_runs_steered(tmp_path, smol):
    """A LensView built with live_steer carries the vector, and its live run asks for it (the page's options)."""
    from llmlab.visualization import LensView

    model, tokenizer = smol
    vector = torch.arange(576, dtype=torch.float32) / 576
    view = LensView.from_model(model, tokenizer, "The sea is", live_steer=(vector, 12, 1.0))
    steer = view.data["live"]["steer"]
    assert steer["layer"] == 12 and steer["scale"] == 1.0
    llmlab.assert_same_bits(np.array(steer["vector"], dtype=np.float32), vector.numpy())   # a copy, no arithmetic
    browser, page = open_static(tmp_path, view.to_html())
    try:
        options = page.evaluate("Promise.resolve(llmlab.liveOptions.lens(window.llmlab._lensData = "
                                f"{json.dumps(view.data)}, null)).then(o => [o.lensLast, o.steer.layer, o.steer.vector.length])")
        panel = page.evaluate("!!document.querySelector('[data-writer=steer]')")
    finally:
        browser.close()
    assert options == [8, 12, 576]
    assert panel                            # the steering panel sits under the view
    with pytest.raises(ValueError, match="has 576 numbers .* got 3"):
        LensView.from_model(model, tokenizer, "The sea is", live_steer=([1.0, 2.0, 3.0], 12, 1.0))


def test_a_plain_click_on_a_head_button_lists_it_for_knock_out(tmp_path, smol):
    """The attention view's knock-out panel: one button per head of the block shown; a click toggles "block.head"."""
    from llmlab.visualization import AttentionView

    model, tokenizer = smol
    view = AttentionView.from_model(model, tokenizer, "The cat sat on the mat", layer=5, head=6)
    browser, page = open_static(tmp_path, view.to_html())
    try:
        got = page.evaluate("""(() => {
          const root = document.querySelector('div.llmlab-view.llmlab-attention');
          const panel = root.querySelector('[data-writer=ablate]'), box = panel.querySelector('[data-name=ablate-heads]');
          const button = h => panel.querySelector(`[data-head="${h}"]`);
          const layer = root.querySelector('.llmlab-controls select');
          const block = /(\\d+)\\s*$/.exec(layer.options[layer.selectedIndex].text)[1];
          const out = [block, panel.querySelectorAll('[data-head]').length];
          button(3).click(); button(5).click(); out.push(box.value, button(3).getAttribute('aria-pressed'));
          button(3).click(); out.push(box.value, button(3).getAttribute('aria-pressed'), button(5).getAttribute('aria-pressed'));
          layer.value = String((layer.selectedIndex + 1) % layer.options.length); layer.dispatchEvent(new Event('change', {bubbles: true}));
          const other = /(\\d+)\\s*$/.exec(layer.options[layer.selectedIndex].text)[1];
          out.push(other, button(5).getAttribute('aria-pressed')); button(0).click(); out.push(box.value);
          return out; })()""")
    finally:
        browser.close()
    block, n, *rest = got
    other = rest[5]
    assert n == model.config.n_heads
    assert rest == [f"{block}.3 {block}.5", "true", f"{block}.5", "false", "true", other, "false", f"{block}.5 {other}.0"]
    assert other != block


def test_byte_pieces_are_named_by_their_character_in_the_attention_view(tmp_path, smol):
    """Chinese tokens that are pieces of one character read "天 1/2", "天 2/2" in the attention view (spans and
    grid), and L.readableTokens leaves whole tokens alone and groups pieces split across tokens."""
    from llmlab.visualization import AttentionView

    model, tokenizer = smol
    prompt = "今天天气很好，我们去公园"
    view = AttentionView.from_model(model, tokenizer, prompt, layer=5, head=6)
    assert "<e5><a4>" in view.data["tokens"]                    # the book's data keeps llmlab's own labels
    browser, page = open_static(tmp_path, view.to_html())
    try:
        spans = page.evaluate("[...document.querySelectorAll('div.llmlab-attention .llmlab-tok')].map(s => s.textContent)")
        key = page.evaluate("document.querySelector('div.llmlab-attention .llmlab-token-key').textContent")
        mixed = page.evaluate("llmlab.readableTokens(%s)" % json.dumps(
            show_token_ids(tokenizer, tokenizer.encode("法国的首都是巴黎 🙂"))))
    finally:
        browser.close()
    runs = [("今", 2), ("天", 2), ("天", 2), ("气", 3), ("很", 2), ("好", 2), ("，", 1), ("我", 2), ("们", 2),
            ("去", 2), ("公", 2), ("园", 2)]
    assert spans == [c if n == 1 else f"{c} {i}/{n}" for c, n in runs for i in range(1, n + 1)]
    assert "今 1/2: the first of 2 tokens that make \"今\" together" in key
    assert mixed == ["法", "国 1/2", "国 2/2", "的", "首 1/3", "首 2/3", "首 3/3", "都 1/2", "都 2/2", "是",
                     "巴 1/2", "巴 2/2", "黎 1/3", "黎 2/3", "黎 3/3", "\u2423🙂"]


def test_figures_open_full_size_and_the_theme_mode_is_valid(tmp_path):
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "llmlab-figures.js").write_text((ROOT / "assets" / "llmlab-figures.js").read_text())
    (tmp_path / "fig.png").write_bytes(b"")
    page_path = tmp_path / "page.html"
    page_path.write_text("<!DOCTYPE html><html data-mode=''><head><script src='_static/llmlab-figures.js'></script></head>"
                         "<body><main><figure><img src='fig.png' alt='a figure'></figure></main></body></html>")
    with Chromium() as browser:
        page = browser.open(page_path.as_uri())
        out = page.evaluate("[document.documentElement.dataset.mode, document.querySelector('figure > a > img') !== null, "
                            "document.querySelector('figure > a').getAttribute('href')]")
    assert out[0] == "auto" and out[1] and out[2].endswith("fig.png")


def test_the_tokens_view_needs_only_the_tokenizer_and_names_characters(tmp_path, smol):
    from llmlab.visualization import TokensView

    _, tokenizer = smol
    text = "国王 likes 🙂 and 龘"
    browser, page = open_static(tmp_path, TokensView.from_tokenizers("hello", {"SmolLM2-135M": tokenizer}).to_html())
    try:
        out = page.evaluate(RUN_VIEW % ("tokens", json.dumps(text)), timeout=120)
        chars = page.evaluate("[...document.querySelectorAll('[data-live=yes] .llmlab-char')].map(s => s.dataset.char)")
        model = page.evaluate("llmlabLive.status().status")
    finally:
        browser.close()
    ids = tokenizer.encode(text)
    assert out["ids"] == ids
    assert model == "idle"                                   # the 120 MB model was never loaded
    pieces = [t for t in show_token_ids(tokenizer, ids) if "<" in t]
    assert pieces and set(chars) == {"国", "王", " 龘"}         # byte pieces grouped under their character (🙂 is whole)


def test_the_sampling_view_writes_and_chats(smol, page):
    """The Write box under the sampling view streams greedy text equal to llmlab.generate's; Stop ends it."""
    model, tokenizer = smol
    page.evaluate(RUN_VIEW % ("sampling", json.dumps("The capital of France is")), timeout=300)
    out = page.evaluate("""(async () => {
      const box = document.querySelector('div.llmlab-view.llmlab-sampling [data-writer=write]');
      box.querySelector('[data-name=writer-prompt]').value = 'The capital of France is';
      const t = box.querySelector('[data-name=writer-temperature]'); t.value = '0'; t.dispatchEvent(new Event('input'));
      box.querySelector('[data-action=write]').click();
      const start = performance.now();
      while (!/^Done|^Stopped/.test(box.querySelector('.llmlab-live-status').textContent)) {
        if (performance.now() - start > 280000) throw new Error(box.querySelector('.llmlab-live-status').textContent);
        await new Promise(r => setTimeout(r, 100));
      }
      return {text: [...box.querySelectorAll('.llmlab-written-token')].map(s => s.textContent).join(''),
              status: box.querySelector('.llmlab-live-status').textContent,
              chat: !!document.querySelector('div.llmlab-view.llmlab-sampling [data-writer=chat] [data-action=ask]')};
    })()""", timeout=300)
    ids = tokenizer.encode("The capital of France is")
    want = llmlab.generate(model, torch.tensor([ids]), max_new_tokens=60, eos_token_id=0)[0, len(ids):].tolist()
    assert out["text"] == tokenizer.decode([i for i in want if i != 0])
    assert "ms per token" in out["status"] and out["chat"]


def test_the_cache_view_writes_the_same_text_both_ways(tmp_path):
    from llmlab.visualization import WriteView

    browser, page = open_static(tmp_path, WriteView("cache", prompt="The capital of France is", max_new_tokens=6).to_html())
    try:
        out = page.evaluate("""(async () => {
          const root = document.querySelector('div.llmlab-view.llmlab-write');
          root.querySelector('[data-action=race]').click();
          const note = root.querySelector('[data-name=cache-numbers]'), start = performance.now();
          while (!note.hasAttribute('data-cache-ms')) {
            if (performance.now() - start > 280000) throw new Error(root.querySelector('.llmlab-live-status').textContent);
            await new Promise(r => setTimeout(r, 100));
          }
          return {status: root.querySelector('.llmlab-live-status').textContent, note: note.textContent,
                  lines: root.querySelectorAll('svg line').length};
        })()""", timeout=300)
    finally:
        browser.close()
    assert out["status"].startswith("The same text both ways")
    # 5 + 6 tokens - 1 in the cache after the last step: 2 x 30 blocks x 3 heads x 64 x 4 bytes each
    assert f"holds {2 * 30 * 3 * 64 * 4 * 10 // 1024:,} KiB" in out["note"].replace(",", ",")
    assert out["lines"] > 4                                  # the axes and both series


def test_leaving_a_page_frees_the_live_model(tmp_path, smol):
    """pagehide ends the worker and its weights (a page kept for "back" would keep them); a run after coming
    back, or on the next page, starts a new worker from the IndexedDB copy and gives llmlab's numbers."""
    model, tokenizer = smol
    prompt = "The Eiffel Tower is in the city of"
    ids = tokenizer.encode(prompt)
    with torch.no_grad():
        want = torch.topk(model(torch.tensor([ids]))[0, -1], 5).indices.tolist()
    page_a = make_site(tmp_path, "")
    (tmp_path / "next.html").write_text(page_a.read_text(encoding="utf-8"), encoding="utf-8")
    top = f"llmlabLive.run({json.dumps(prompt)}, {{attention: false}}).then(r => r.next.slice(0, 5).map(n => n.id))"
    workers = "llmlabLive.status().workers"
    with static_server(tmp_path) as url, Chromium(loopback=True) as browser:
        page = browser.open(url + "page.html")
        assert page.evaluate(top, timeout=300) == want
        assert page.evaluate(workers) == {"alive": True, "started": 1, "stopped": 0}
        # the browser's events when a page goes into the back/forward cache and comes back from it
        page.evaluate("window.dispatchEvent(new PageTransitionEvent('pagehide', {persisted: true})), 1")
        assert page.evaluate(workers) == {"alive": False, "started": 1, "stopped": 1}
        assert page.evaluate("llmlabLive.status().status") == "idle"
        page.evaluate("window.dispatchEvent(new PageTransitionEvent('pageshow', {persisted: true})), 1")
        assert page.evaluate(top, timeout=300) == want
        assert page.evaluate(workers) == {"alive": True, "started": 2, "stopped": 1}
        assert page.evaluate("llmlabLive.info().source") == "indexeddb"
        # a run cut short by leaving is rejected, not left waiting
        cut = page.evaluate("""(async () => {
          const g = llmlabLive.generate('Once upon a time', {maxNewTokens: 200, onToken: t => { if (t.index === 1)
            window.dispatchEvent(new PageTransitionEvent('pagehide', {persisted: true})); }});
          try { await g; return 'finished'; } catch (e) { return e.name; } })()""", timeout=300)
        assert cut == "AbortError" and page.evaluate(workers)["alive"] is False
        # really leaving: to the next page, which runs the model, and back
        page.evaluate("window.kept = 1")
        page.navigate(url + "next.html")
        assert page.evaluate(top, timeout=300) == want
        page.back(url + "page.html")
        restored = page.evaluate("window.kept === 1")
        assert page.evaluate(workers)["alive"] is False
        assert page.evaluate(top, timeout=300) == want
        print(f"back/forward cache restored the page: {restored}; renderers hold {browser.renderer_bytes() / 1e9:.2f} GB")


WAIT_DONE = """(async (box, status) => {
  const start = performance.now();
  while (!status(box)) {
    if (performance.now() - start > 280000) throw new Error(box.textContent.slice(-300));
    await new Promise(r => setTimeout(r, 100));
  }
})"""


def test_the_boxes_end_a_turn_repeat_a_seed_and_keep_line_breaks(tmp_path, smol):
    """Write stops at <|im_end|> on a text in the chat template; its seed writes the same text again (with the
    repetition penalty on, as the API writes it); the knock-out and steering results show before and after
    as separate blocks that keep their line breaks."""
    from llmlab.visualization import AttentionView, LensView, SamplingView

    model, tokenizer = smol
    prompt = "The cat sat on the mat because it"
    with torch.no_grad():
        logits = model(torch.tensor([tokenizer.encode(prompt)]))[0, -1]
    views = [SamplingView.from_logits([prompt], logits[None], tokenizer, n=15),
             AttentionView.from_model(model, tokenizer, prompt, layer=5, head=6),
             LensView.from_model(model, tokenizer, "The sea is", live_steer=(torch.arange(576.0) / 576, 12, 2.0))]
    make_site(tmp_path, "".join(view.to_html() for view in views), preload=False)
    conversation = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
    write = f"""(async (text, temperature, seed, penalty) => {{
      const box = document.querySelector('div.llmlab-view.llmlab-sampling [data-writer=write]');
      const set = (name, value) => {{ const s = box.querySelector(`[data-name=writer-${{name}}]`);
        s.value = value; s.dispatchEvent(new Event('input')); }};
      set('prompt', text); set('temperature', temperature); set('seed', seed); set('repetition', penalty);
      box.querySelector('[data-action=write]').click();
      await {WAIT_DONE}(box, b => /^Done|^Stopped/.test(b.querySelector('.llmlab-live-status').textContent));
      return {{text: [...box.querySelectorAll('.llmlab-written-token')].map(s => s.textContent).join(''),
              status: box.querySelector('.llmlab-live-status').textContent,
              filters: ['top_k', 'top_p', 'min_p'].map(n => parseFloat(box.querySelector(`[data-name=writer-${{n}}]`).value))}};
    }})"""
    with static_server(tmp_path) as url, Chromium(loopback=True) as browser:
        page = browser.open(url + "page.html")
        turn = page.evaluate(f"{write}({json.dumps(conversation)}, '0', '', '1')", timeout=300)
        assert turn["status"].startswith("Done (end of text)") and "Paris" in turn["text"]
        assert "im_" not in turn["text"] and "⟨" not in turn["text"]
        api = page.evaluate(f"llmlabLive.generate({json.dumps(conversation)}, {{maxNewTokens: 60}})"
                            ".then(g => [g.stopped, g.ids[g.ids.length - 1], g.text])", timeout=300)
        assert api == ["eos", 2, turn["text"]]
        # greedy ids on a plain text still end at <|endoftext|> only, as llmlab.generate(eos_token_id=0)
        ids = tokenizer.encode("Once upon a time")
        want = llmlab.generate(model, torch.tensor([ids]), max_new_tokens=12, eos_token_id=0)[0, len(ids):].tolist()
        assert page.evaluate("llmlabLive.generate('Once upon a time', {maxNewTokens: 12}).then(g => g.ids)",
                             timeout=300) == want

        first = page.evaluate(f"{write}('Once upon a time', '1', '7', '1.3')", timeout=300)
        again = page.evaluate(f"{write}('Once upon a time', '1', '7', '1.3')", timeout=300)
        assert first["text"] and again["text"] == first["text"]
        k, p, m = first["filters"]                                 # the sliders' filters, as the box passes them
        options = dict(maxNewTokens=60, temperature=1, topK=int(k) or None, topP=None if p >= 1 else p, minP=m or None,
                       seed=7, repetitionPenalty=1.3)
        same = page.evaluate(f"llmlabLive.generate('Once upon a time', {json.dumps(options)}).then(g => g.text)", timeout=300)
        assert same == first["text"]

        ko = page.evaluate(f"""(async () => {{
          const panel = document.querySelector('[data-writer=ablate]');
          panel.querySelector('[data-name=ablate-heads]').value = '5.6 0.3';
          panel.querySelector('[data-action=ablate]').click();
          await {WAIT_DONE}(panel, p => p.querySelectorAll('.llmlab-compare').length === 3);
          return [...panel.querySelectorAll('.llmlab-compare')].map(row => [row.firstChild.textContent,
            row.querySelector('[data-name=compare-text]') ? getComputedStyle(row.lastChild).whiteSpace : null]);
        }})()""", timeout=300)
        assert ko[0] == ["As it is:", "pre-wrap"] and ko[1] == ["Knocked out (5.6 0.3):", "pre-wrap"]
        assert ko[2][0].endswith(".") and ko[2][1] is None

        steered = page.evaluate(f"""(async () => {{
          const panel = document.querySelector('[data-writer=steer]');
          panel.querySelector('[data-action=steer]').click();
          await {WAIT_DONE}(panel, p => p.querySelectorAll('.llmlab-compare').length === 2);
          const texts = [...panel.querySelectorAll('[data-name=compare-text]')];
          return {{labels: [...panel.querySelectorAll('.llmlab-compare-label')].map(l => l.textContent),
                  texts: texts.map(t => t.textContent), white: texts.map(t => getComputedStyle(t).whiteSpace),
                  prompt: panel.querySelector('[data-name=steer-prompt]').value}};
        }})()""", timeout=300)
        plain = page.evaluate(f"llmlabLive.generate({json.dumps(steered['prompt'])}, {{maxNewTokens: 20}}).then(g => g.text)",
                              timeout=300)
    assert steered["labels"] == ["As it is:", "Steered (block 12, scale 2):"]
    assert steered["texts"][0] == steered["prompt"] + plain          # line breaks and all, as written
    assert steered["white"] == ["pre-wrap", "pre-wrap"]
