"""Live versions of the views for Jupyter and Colab: type a prompt, pick a model, layer or head.

Each explorer is a column of ipywidgets controls above an `ipywidgets.HTML` output. The output
is re-rendered in Python on every change with the view's `static_html()` (HTML and CSS only:
scripts inside ipywidgets.HTML never run), so it works in every frontend that shows widgets.
Hovering a cell shows its value through the cell's tooltip.

    attention_explorer({"SmolLM2": llmlab.load("smollm2-135m")})
    lens_explorer(llmlab.load("gemma3-270m"), prompt="天气", target=None)

`models` may be one (model, tokenizer) pair, a dict name -> (model, tokenizer), or a dict
name -> a name for llmlab.load (loaded the first time it is picked).
"""
from __future__ import annotations

import torch

from llmlab.visualization.attention_views import AttentionView
from llmlab.visualization.html import read_asset
from llmlab.visualization.sampling_views import SamplingView
from llmlab.visualization.table_views import LensView
from llmlab.visualization.token_views import TokensView


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
                logits = model(as_ids(model, tokenizer=tokenizer, prompt=text.value))[0, -1]  # (vocab,)
            views[key] = SamplingView.from_logits([text.value], logits, tokenizer, n=n)
        out.value = _page(views[key].static_html(0, temperature.value, top_k.value, top_p.value))

    for control in (text, model_pick, temperature, top_k, top_p):
        control.observe(refresh, names="value")
    refresh()
    return W.VBox([text, model_pick, W.HBox([temperature, top_k, top_p]), out])
