"""The attention views: an attention explorer (layers, heads, a T x T map of weights) and a view
of attention masks (which keys each query may attend to)."""
from __future__ import annotations

import numpy as np
import torch

from llmlab.inspection.budget import RESULT_LIMIT
from llmlab.visualization.display import show_token, show_token_ids, text_of_shown
from llmlab.visualization.grid import as_array, grid_html, legend_html
from llmlab.visualization.html import LIVE_MODEL, View, css_blue, escape, live_data, pack_unit_floats


def without_sink(weights: np.ndarray) -> np.ndarray:
    """Each row without its first key, renormalised (row 0, which has only that key, stays): what the
    views show with "hide the first token". Stored on its own, because where the first token takes
    99.9% of a row, the rest is lost when the row is stored to 1/255.

    >>> without_sink(np.array([[[[1.0, 0.0], [0.996, 0.004]]]]))[0, 0].tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    w = np.asarray(weights, dtype=np.float64)
    rest = w[..., 1:].sum(-1, keepdims=True)                                          # (..., T, 1)
    out = np.zeros_like(w)
    out[..., 1:] = np.divide(w[..., 1:], rest, out=np.zeros_like(w[..., 1:]), where=rest > 0)
    out[..., 0, :] = w[..., 0, :]
    return out


def informative_row(weights) -> int:
    """The query row that says most about a (T, T) attention map: the one that puts the most weight on a
    single earlier token that is neither the first token (the usual sink) nor itself. Falls back to the
    last row when no row does (T <= 2, or every row looks only at the sink and itself)."""
    w = np.asarray(weights, dtype=np.float64)
    T = w.shape[-1]
    best, best_score = T - 1, 0.0
    for i in range(2, T):
        score = float(w[i, 1:i].max())
        if score > best_score + 1e-9:
            best, best_score = i, score
    return best


class AttentionView(View):
    """Attention explorer: layer and head selectors, heads at a glance, a T x T map, hover a cell or a token.

    weights: (n_layers, n_heads, T, T), (n_heads, T, T) or (T, T) attention probabilities,
             e.g. `torch.stack([cache.pattern(l)[0] for l in range(n)])`.
    query  : the query row shown first; None picks an informative one (see `informative_row`).
    hide_sink: start with the first token's column hidden and every row renormalised (a checkbox
             in the view toggles it), so the structure that the attention sink drowns out shows.
    Thumbnails of every head of the layer (or of every layer) focus the map on click.
    live   : in the built book, a prompt box that reruns the view on the live SmolLM2-135M (None:
             on when the weights have SmolLM2's 9 heads per layer).
    """

    kind = "attention"
    BYTES_PER_WEIGHT = 48  # what from_model holds per weight at its peak (float32 x 2, float64 x 4, bytes)

    def __init__(self, tokens, weights, layer_labels=None, title=None, layer: int = 0, head: int = 0,
                 query: int | None = None, hide_sink: bool = False, live: bool | None = None):
        weights = as_array(weights, "weights", (2, 3, 4))
        while weights.ndim < 4:
            weights = weights[None]
        n_layers, n_heads, T, T2 = weights.shape
        tokens = [show_token(t) for t in tokens]
        if T != T2 or T != len(tokens):
            raise ValueError(f"weights must be (layers, heads, T, T) with T = len(tokens) = {len(tokens)}; "
                             f"got shape {weights.shape}.")
        layer_labels = list(layer_labels) if layer_labels is not None else [f"block {i}" for i in range(n_layers)]
        if len(layer_labels) != n_layers:
            raise ValueError(f"{len(layer_labels)} layer labels for {n_layers} layers.")
        if not (-n_layers <= layer < n_layers and 0 <= head <= n_heads):
            raise ValueError(f"layer={layer}, head={head} is outside {n_layers} layers x {n_heads} heads "
                             f"(layer counts from 0, or from the end when negative; head={n_heads} is the mean "
                             f"of the heads). Pick a layer from {-n_layers} to {n_layers - 1}.")
        if query is not None and not -T <= query < T:
            raise ValueError(f"query={query} is outside the {T} positions.")
        layer = layer % n_layers                         # -1 is the last layer, as in Python
        self.weights = weights
        opening = weights[layer].mean(0) if head == n_heads else weights[layer, head]
        query = informative_row(opening) if query is None else int(query) % T
        super().__init__({"tokens": tokens, "layers": layer_labels, "n_heads": n_heads,
                          "weights": pack_unit_floats(weights), "weights_nosink": pack_unit_floats(without_sink(weights)),
                          "layer": layer, "head": head, "query": query,
                          "hide_sink": bool(hide_sink),
                          **live_data(n_heads == LIVE_MODEL["n_heads"] if live is None else live, text_of_shown(tokens))},
                         title)

    @classmethod
    def from_model(cls, model, tokenizer, prompt, layers=None, title=None, max_bytes: int | None = RESULT_LIMIT,
                   **kwargs) -> "AttentionView":
        """Run `prompt` (eager attention) and show the patterns of `layers` (default: all).

        The view holds layers x heads x T x T weights several times over while it is built (the captured
        float32 patterns, their float64 copy, the copy without the first key, the packed bytes): about
        BYTES_PER_WEIGHT bytes per weight. Above max_bytes (None: no limit) it is refused before the run.
        """
        from llmlab.checks import as_ids
        from llmlab.inspection import capture
        from llmlab.inspection.budget import check_size

        n = model.config.n_layers
        if layers is None:
            layers = list(range(n))
        else:
            wrong = [l for l in layers if not isinstance(l, int) or not -n <= l < n]
            if wrong:
                raise ValueError(f"layers {wrong} do not exist: this model has {n} layers, numbered 0 to {n - 1} "
                                 f"(or -{n} to -1 from the end). Pick layers in that range.")
            layers = [l % n for l in layers]  # -1 -> the last layer, as Python indexes
        T, H = as_ids(model, tokenizer=tokenizer, prompt=prompt).shape[1], model.config.n_heads
        check_size(f"This attention view ({len(layers)} layers x {H} heads x {T} x {T} weights)",
                   len(layers) * H * T * T * cls.BYTES_PER_WEIGHT, max_bytes, "Show fewer layers (layers=[0, -1]) "
                   "or a shorter prompt, or raise max_bytes.")
        _, cache = capture(model, tokenizer=tokenizer, prompt=prompt, names=["*hook_pattern"], layers=layers,
                           max_bytes=max_bytes, logits_to_keep=1)  # the view reads the weights, not the logits
        weights = torch.stack([cache.pattern(l)[0] for l in layers])  # (L, H, T, T)
        tokens = show_token_ids(tokenizer, as_ids(model, tokenizer=tokenizer, prompt=prompt)[0]) if isinstance(prompt, str) \
            else cache.tokens
        return cls(tokens, weights, [f"block {l}" for l in layers], title=title, **kwargs)

    def static_html(self, layer: int | None = None, head: int | None = None) -> str:
        """The map of one layer/head (head=None: mean of heads) as a plain table."""
        layer = self.data["layer"] if layer is None else layer
        head = self.data["head"] if head is None else head
        w = self.weights[layer].mean(0) if head is None or head >= self.data["n_heads"] else self.weights[layer, head]
        tokens = self.data["tokens"]

        def cell(i, j):
            return "", css_blue(w[i, j]), 0.0, f"{tokens[i]} → {tokens[j]}: {w[i, j]:.3f}"

        return legend_html("attention weight") + grid_html(tokens, tokens, cell, "query \\ key")


class MaskView(View):
    """Attention masks side by side: which keys each query may attend to (1/True) and which are masked.

    Use `mask_view(...)`; see there.
    """

    kind = "mask"

    def __init__(self, masks: dict, tokens=None, title=None):
        if not isinstance(masks, dict) or not masks:
            raise ValueError("masks must be a non-empty dict name -> (T, T) mask, e.g. "
                             "{'causal': causal_mask(8), 'window 3': sliding_window_mask(8, 3)}.")
        arrays = {}
        for name, mask in masks.items():
            m = as_array(mask, f"mask {name!r}", tuple(range(1, 7)))
            while m.ndim > 2 and m.shape[0] == 1:        # (1, 1, T, T) -> (T, T)
                m = m[0]
            if m.ndim == 2 and m.shape[0] == 1:          # a padding mask over keys, (1, T): the same for every query
                m = np.repeat(m, m.shape[1], axis=0)
            if m.ndim != 2 or m.shape[0] != m.shape[1]:
                raise ValueError(f"mask {name!r} has shape {tuple(np.shape(mask))}; expected (T, T) "
                                 "(row = query, column = key, True/1 = may attend).")
            if not np.isin(m, (0.0, 1.0)).all():
                raise ValueError(f"mask {name!r} holds values other than 0/1 (or False/True); a mask says "
                                 "only whether a query may attend to a key. For attention weights use "
                                 "AttentionView.")
            arrays[str(name)] = m
        sizes = {m.shape[0] for m in arrays.values()}
        if len(sizes) != 1:
            raise ValueError(f"all masks must have the same size T; got {sorted(sizes)}.")
        T = sizes.pop()
        tokens = [f"t{i}" for i in range(T)] if tokens is None else [show_token(t) for t in tokens]
        if len(tokens) != T:
            raise ValueError(f"{len(tokens)} tokens for masks of size {T} x {T}.")
        self.masks = arrays
        super().__init__({"names": list(arrays), "tokens": tokens,
                          "masks": [pack_unit_floats(m) for m in arrays.values()]}, title)

    def static_html(self) -> str:
        name, m = next(iter(self.masks.items()))
        tokens = self.data["tokens"]

        def cell(i, j):
            on = bool(m[i, j])
            return "", "#1f4e79" if on else "#e9e9e9", 1.0 if on else 0.0, \
                f"{name}: {tokens[i]} → {tokens[j]}: {'may attend' if on else 'masked'}"

        return f'<div class="llmlab-readout">{escape(name)}</div>' + grid_html(tokens, tokens, cell, "query \\ key")


def mask_view(masks: dict, tokens: list[str] | None = None, title: str | None = None) -> MaskView:
    """A view of attention masks: pick a mask, see the (T, T) grid, hover/tap/arrow to a cell to read
    which keys its query may attend to ("t5 may attend to t2..t5 (4 positions)").

    masks : dict name -> (T, T) tensor or array, row = query, column = key, True/1 = may attend
            (e.g. causal_mask(T), sliding_window_mask(T, w)); a (1, T) key mask (padding) is applied
            to every query. All masks must have the same T.
    tokens: labels of the T positions (default "t0" .. "t{T-1}").
    """
    return MaskView(masks, tokens, title)
