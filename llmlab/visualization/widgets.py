"""Live versions of the views for Jupyter and Colab: type a prompt, pick a model, layer or head.

Each explorer is a column of ipywidgets controls above an `ipywidgets.HTML` output. The output
is re-rendered in Python on every change with the view's `static_html()` (HTML and CSS only:
scripts inside ipywidgets.HTML never run), so it works in every frontend that shows widgets.
Hovering a cell shows its value through the cell's tooltip.

    attention_explorer({"SmolLM2": llmlab.load("smollm2-135m")})
    lens_explorer(llmlab.load("gemma3-270m"), prompt="天气", target=None)

`models` may be one (model, tokenizer) pair, a dict name -> (model, tokenizer), or a dict
name -> a name for llmlab.load (loaded the first time it is picked).

Without a kernel there is nothing to redraw the widgets: when the book is built (`make book` sets
LLMLAB_BOOK_BUILD=1), every explorer returns instead the view of its opening settings, drawn for the
static page (`book_view`): the attention, lens, sampling and token views keep their own pickers and
sliders there, and their "Run live" box reruns them on SmolLM2-135M in the reader's browser; the
similarity explorer shows its chart. So every page that calls an explorer has a view that works
without Python. Works with ipywidgets 7.x and 8.x.
"""
from __future__ import annotations

import html

import numpy as np
import torch

from llmlab.visualization.attention_views import AttentionView
from llmlab.visualization.html import in_book_build, read_asset
from llmlab.visualization.sampling_views import SamplingView
from llmlab.visualization.table_views import LensView
from llmlab.visualization.token_views import TokensView


class StaticHTML:
    """HTML shown as it is (a chart drawn in Python), for `book_view`."""

    def __init__(self, html_text: str):
        self.html = html_text

    def _repr_html_(self) -> str:
        return self.html


def book_view(explorer: str, models, **settings):
    """What `explorer` shows in the built book, where no Python kernel runs: its view at the opening
    settings (the first model, the given prompt, block and head), drawn for the static page.

    For example `book_view("sampling_explorer", (model, tokenizer), prompt="The capital of France is", n=15)`
    is the SamplingView of that prompt, with its sliders and its "Run live" box.
    """
    if explorer == "tokenizer_explorer":
        return TokensView.from_tokenizers(settings["text"], models)
    chosen = Models(models)
    model, tokenizer = chosen.get(chosen.names[0])                  # the first model, as the explorer opens
    if explorer == "attention_explorer":
        # six blocks spread over the depth, and the one asked for: a page carries every head of each
        # (a whole model's maps would weigh about 100 KB a prompt on every page that has one)
        n = model.config.n_layers
        layers = sorted({round(k * (n - 1) / 5) for k in range(6)} | {settings["layer"] % n})
        return AttentionView.from_model(model, tokenizer, settings["prompt"], layers=layers,
                                        layer=layers.index(settings["layer"] % n), head=settings["head"])
    if explorer == "lens_explorer":
        return LensView.from_model(model, tokenizer, settings["prompt"], target=settings["target"], k=settings["k"])
    if explorer == "sampling_explorer":
        from llmlab.checks import as_ids

        with torch.no_grad():
            logits = model(as_ids(model, tokenizer=tokenizer, prompt=settings["prompt"]), logits_to_keep=1)[0, -1]
        return SamplingView.from_logits([settings["prompt"]], logits, tokenizer, n=settings["n"], live=True)
    if explorer == "similarity_explorer":
        result = token_similarity(model, tokenizer, settings["prompt_a"], settings["prompt_b"], settings["token_a"],
                                  settings["token_b"])
        # a chart drawn in Python, no script: not an "llmlab-view" (those are drawn by their script)
        return StaticHTML(f'<div class="llmlab-chart">{similarity_svg(result)}</div>')
    raise ValueError(f"{explorer!r} is not one of llmlab's explorers: attention_explorer, lens_explorer, "
                     f"sampling_explorer, tokenizer_explorer, similarity_explorer.")




def _page(inner: str) -> str:
    return f"<style>{read_asset('views.css')}</style><div class=\"llmlab-view\">{inner}</div>"


class Models:
    """Resolve the `models` argument of the explorers; load named models only when first needed."""

    def __init__(self, models):
        if isinstance(models, tuple):
            models = {"model": models}
        if isinstance(models, (list, str)):
            models = {name: name for name in ([models] if isinstance(models, str) else models)}
        if not isinstance(models, dict) or not models:
            raise TypeError("models must be a (model, tokenizer) pair, a dict name -> (model, tokenizer), "
                            "or a dict name -> name for llmlab.load.")
        self.entries = dict(models)

    @property
    def names(self) -> list[str]:
        return list(self.entries)

    def get(self, name: str):
        entry = self.entries[name]
        if isinstance(entry, str):
            import llmlab

            entry = self.entries[name] = llmlab.load(entry)
        return entry


def _widgets():
    try:
        import ipywidgets
    except ImportError as error:  # pragma: no cover - ipywidgets is a dependency
        raise ImportError("The live explorers need ipywidgets: pip install ipywidgets") from error
    return ipywidgets


def attention_explorer(models, prompt: str = "The cat sat on the mat because it was tired.", layer: int = 0,
                       head: int = 0):
    """Prompt box, model/layer/head pickers, and the attention map of the chosen head."""
    if in_book_build():
        return book_view("attention_explorer", models, prompt=prompt, layer=layer, head=head)
    W = _widgets()
    models = Models(models)
    text = W.Text(value=prompt, description="prompt", continuous_update=False, layout=W.Layout(width="60%"))
    model_pick = W.Dropdown(options=models.names, description="model")
    layer_pick = W.IntSlider(value=layer, min=0, max=1, description="layer")
    head_pick = W.Dropdown(description="head")
    out = W.HTML()
    views = {}

    def current_view():
        key = (model_pick.value, text.value)
        if key not in views:
            model, tokenizer = models.get(model_pick.value)
            views[key] = AttentionView.from_model(model, tokenizer, text.value)
        return views[key]

    def refresh(change=None):
        model, _ = models.get(model_pick.value)
        layer_pick.max = model.config.n_layers - 1
        options = [("mean of heads", -1)] + [(f"head {h}", h) for h in range(model.config.n_heads)]
        if list(head_pick.options) != options:
            head_pick.options = options
            head_pick.value = head if head < model.config.n_heads else 0
        view = current_view()
        h = None if head_pick.value == -1 else head_pick.value
        out.value = _page(view.static_html(layer_pick.value, h))

    for control in (text, model_pick, layer_pick, head_pick):
        control.observe(refresh, names="value")
    refresh()
    return W.VBox([text, W.HBox([model_pick, layer_pick, head_pick]), out])


def lens_explorer(models, prompt: str = "The Eiffel Tower is in the city of", target: str | None = None,
                  k: int = 5):
    """Prompt box, optional target token, model picker, and the logit-lens table (hover cells for top-k)."""
    if in_book_build():
        return book_view("lens_explorer", models, prompt=prompt, target=target, k=k)
    W = _widgets()
    models = Models(models)
    text = W.Text(value=prompt, description="prompt", continuous_update=False, layout=W.Layout(width="60%"))
    target_box = W.Text(value=target or "", description="target", continuous_update=False)
    model_pick = W.Dropdown(options=models.names, description="model")
    out = W.HTML()

    def refresh(change=None):
        model, tokenizer = models.get(model_pick.value)
        try:
            view = LensView.from_model(model, tokenizer, text.value, target=target_box.value or None, k=k)
            out.value = _page(view.static_html())
        except ValueError as error:  # e.g. a target that is several tokens: say so instead of a traceback
            out.value = _page(f"<b>{error}</b>")

    for control in (text, target_box, model_pick):
        control.observe(refresh, names="value")
    refresh()
    return W.VBox([text, W.HBox([target_box, model_pick]), out])


def tokenizer_explorer(tokenizers: dict, text: str = "Tokenizers split text into pieces: unbelievable, 天气很好!"):
    """Text box and each tokenizer's pieces, coloured, with ids as tooltips."""
    if in_book_build():
        return book_view("tokenizer_explorer", tokenizers, text=text)
    W = _widgets()
    box = W.Textarea(value=text, description="text", continuous_update=True, layout=W.Layout(width="70%"))
    out = W.HTML()

    def refresh(change=None):
        out.value = _page(TokensView.from_tokenizers(box.value, tokenizers).static_html())

    box.observe(refresh, names="value")
    refresh()
    return W.VBox([box, out])


def sampling_explorer(models, prompt: str = "Once upon a time, there was a", n: int = 15):
    """Prompt box and temperature / top-k / top-p sliders over the model's next-token distribution."""
    if in_book_build():
        return book_view("sampling_explorer", models, prompt=prompt, n=n)
    W = _widgets()
    models = Models(models)
    text = W.Text(value=prompt, description="prompt", continuous_update=False, layout=W.Layout(width="60%"))
    model_pick = W.Dropdown(options=models.names, description="model")
    temperature = W.FloatSlider(value=1.0, min=0.0, max=2.5, step=0.05, description="temperature")
    top_k = W.IntSlider(value=0, min=0, max=max(n, 200), description="top_k (0=off)")
    top_p = W.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.01, description="top_p (1=off)")
    out = W.HTML()
    views = {}

    def refresh(change=None):
        key = (model_pick.value, text.value)
        if key not in views:
            from llmlab.checks import as_ids

            model, tokenizer = models.get(model_pick.value)
            with torch.no_grad():
                ids = as_ids(model, tokenizer=tokenizer, prompt=text.value)
                logits = model(ids, logits_to_keep=1)[0, -1]  # (vocab,): the head runs at the last position only
            views[key] = SamplingView.from_logits([text.value], logits, tokenizer, n=n)
        out.value = _page(views[key].static_html(0, temperature.value, top_k.value, top_p.value))

    for control in (text, model_pick, temperature, top_k, top_p):
        control.observe(refresh, names="value")
    refresh()
    return W.VBox([text, model_pick, W.HBox([temperature, top_k, top_p]), out])


# ------------------------------------------------------------------ representation similarity

def _position(tokenizer, ids: list, token, prompt: str) -> int:
    """A token given as its text (the last occurrence in the prompt) or as a position (negative from the end)."""
    if isinstance(token, str):
        texts = [tokenizer.decode([i]) for i in ids]
        hits = [k for k, t in enumerate(texts) if t == token]
        if not hits:
            raise ValueError(f"{token!r} is not one of the tokens of {prompt!r}, which are {texts}. Give one of "
                             f"those (spaces count: ' bank' is not 'bank') or a position such as -1.")
        return hits[-1]
    if isinstance(token, bool) or not isinstance(token, int) or not -len(ids) <= token < len(ids):
        raise ValueError(f"token position {token!r} is outside the {len(ids)} tokens of {prompt!r}; use 0 to "
                         f"{len(ids) - 1} or -1 for the last.")
    return token % len(ids)


def token_similarity(model, tokenizer, prompt_a: str, prompt_b: str, token_a=-1, token_b=-1) -> dict:
    """Cosine similarity of one token of each prompt, in the residual stream after the embedding and
    after every block, next to the anisotropy baseline: the cosine of unrelated token pairs (every
    token of prompt a with every token of prompt b, leaving out the first position of each, whose
    huge-norm "sink" vector is unlike all others, and the two chosen tokens).

    Returns {"layers": ["embed", "block 0", ...], "pair": (L+1,), "baseline": (L+1,) mean,
    "low"/"high": (L+1,) 5th and 95th percentiles of the baseline pairs, "tokens": the two chosen tokens}.
    """
    from llmlab.inspection import capture, cosine_matrix
    from llmlab.inspection.budget import RESULT_LIMIT, check_size

    streams, chosen, lengths = [], [], []
    for prompt, token in ((prompt_a, token_a), (prompt_b, token_b)):
        if not isinstance(prompt, str) or not prompt:
            raise ValueError(f"prompts must be non-empty strings; got {prompt!r}.")
        ids = tokenizer.encode(prompt)
        chosen.append(_position(tokenizer, ids, token, prompt))
        lengths.append(len(ids))
    check_size(f"token_similarity's table of {lengths[0]} x {lengths[1]} token pairs", lengths[0] * lengths[1] * 12,
               RESULT_LIMIT, "Use shorter prompts.")            # (Ta, Tb) cosines in float64, then float32
    for prompt in (prompt_a, prompt_b):
        _, cache = capture(model, tokenizer, prompt, names=["blocks.0.hook_resid_pre", "*hook_resid_post"],
                           logits_to_keep=1)                               # the logits are not read
        streams.append(cache.accumulated_resid()[:, 0].float().cpu())     # (L+1, T, d)
    (a, b), (i, j) = streams, chosen
    pair, mean, low, high = [], [], [], []
    for layer in range(a.shape[0]):
        sims = cosine_matrix(a[layer], b[layer])                          # (Ta, Tb)
        pair.append(float(sims[i, j]))
        rows = [r for r in range(1, a.shape[1]) if r != i]
        cols = [c for c in range(1, b.shape[1]) if c != j]
        others = sims[rows][:, cols].flatten().numpy() if rows and cols else np.array([np.nan])
        mean.append(float(np.mean(others)))
        low.append(float(np.percentile(others, 5)))
        high.append(float(np.percentile(others, 95)))
    tokens = [tokenizer.decode([tokenizer.encode(p)[k]]) for p, k in ((prompt_a, i), (prompt_b, j))]
    labels = ["embed"] + [f"block {l}" for l in range(a.shape[0] - 1)]
    return {"layers": labels, "pair": pair, "baseline": mean, "low": low, "high": high, "tokens": tokens}


def similarity_svg(result: dict, width: int = 560, height: int = 240) -> str:
    """The per-layer similarity as an inline SVG line chart (the pair, the baseline and its 5-95% band)."""
    from llmlab.visualization.display import show_token

    n = len(result["layers"])
    left, right, top, bottom = 44, 10, 12, 34
    lo = min(-0.2, min(result["low"]), min(result["pair"]))
    x = lambda k: left + (width - left - right) * k / max(n - 1, 1)            # noqa: E731
    y = lambda v: top + (height - top - bottom) * (1 - (v - lo) / (1 - lo))   # noqa: E731
    line = lambda values: " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in enumerate(values))  # noqa: E731
    band = line(result["high"]) + " " + " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in reversed(list(enumerate(result["low"]))))
    ticks = "".join(f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>'
                    f'<text x="{left - 4}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="10">{v:g}</text>'
                    for v in (0.0, 0.5, 1.0) if v >= lo)
    xt = "".join(f'<text x="{x(k):.1f}" y="{height - bottom + 14}" text-anchor="middle" font-size="10">'
                 f'{"emb" if k == 0 else k - 1}</text>' for k in range(0, n, max(1, n // 10)))
    a, b = (html.escape(show_token(t)) for t in result["tokens"])
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
            f'aria-label="cosine similarity of {a} and {b} at every layer, and the baseline of unrelated pairs">'
            f'{ticks}<polygon points="{band}" fill="#bbb" fill-opacity="0.35"/>'
            f'<polyline points="{line(result["baseline"])}" fill="none" stroke="#777" stroke-dasharray="4 3"/>'
            f'<polyline points="{line(result["pair"])}" fill="none" stroke="#1f77b4" stroke-width="2"/>{xt}'
            f'<text x="{(left + width) / 2}" y="{height - 4}" text-anchor="middle" font-size="11">'
            f'block (emb = after the embedding)</text></svg>'
            f'<div style="font-size:12px"><span style="color:#1f77b4">━</span> "{a}" (prompt a) vs "{b}" (prompt b) '
            f'&nbsp; <span style="color:#777">┅</span> baseline: unrelated token pairs of the two prompts '
            f'(mean; band: 5th-95th percentile)</div>')


def similarity_explorer(models, prompt_a: str = "I sat on the bank of the river.",
                        prompt_b: str = "I paid the cash into the bank.", token_a=" bank", token_b=" bank"):
    """Two prompts, one token of each: their cosine similarity at every layer, next to the anisotropy
    baseline (how similar unrelated tokens already are at that layer). A token is given as its text
    (" bank", the last occurrence) or as a position (-1 = the last token)."""
    if in_book_build():
        return book_view("similarity_explorer", models, prompt_a=prompt_a, prompt_b=prompt_b, token_a=token_a,
                         token_b=token_b)
    W = _widgets()
    models = Models(models)
    box_a = W.Text(value=prompt_a, description="prompt a", continuous_update=False, layout=W.Layout(width="60%"))
    box_b = W.Text(value=prompt_b, description="prompt b", continuous_update=False, layout=W.Layout(width="60%"))
    pick_a = W.Text(value=str(token_a), description="token a", continuous_update=False)
    pick_b = W.Text(value=str(token_b), description="token b", continuous_update=False)
    model_pick = W.Dropdown(options=models.names, description="model")
    out = W.HTML()

    def token_of(text: str):
        return int(text) if text.strip().lstrip("-").isdigit() else text

    def refresh(change=None):
        model, tokenizer = models.get(model_pick.value)
        try:
            result = token_similarity(model, tokenizer, box_a.value, box_b.value, token_of(pick_a.value),
                                      token_of(pick_b.value))
            out.value = _page(similarity_svg(result))
        except ValueError as error:
            out.value = _page(f"<b>{html.escape(str(error))}</b>")

    for control in (box_a, box_b, pick_a, pick_b, model_pick):
        control.observe(refresh, names="value")
    refresh()
    return W.VBox([box_a, box_b, W.HBox([pick_a, pick_b, model_pick]), out])
