"""The static views: data in, a self-contained HTML+JS block out.

Each class takes plain data (token strings, arrays or tensors) and nothing else, so the same
view can show a real model, a toy example, or numbers a chapter made up. Displaying one in a
notebook renders it; `.save("x.html")` writes a standalone page.

    >>> view = SimilarityView([[1.0, 0.2], [0.2, 1.0]], ["cat", "dog"])
    >>> "llmlab-similarity" in view._repr_html_()
    True

`static_html()` is an HTML/CSS-only rendering of the current selection (colours and `title`
tooltips, no script): it is shown until the script runs, and the live widgets display it.
"""
from __future__ import annotations

import numpy as np
import torch

from llmlab.visualization.display import show_token, show_token_ids
from llmlab.visualization.html import (
    View, css_blue, css_diverging, escape, pack_unit_floats, text_colour, to_list,
)


def _array(x, name: str, ndim: tuple[int, ...]) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    x = np.asarray(x, dtype=np.float64)
    if x.ndim not in ndim:
        raise ValueError(f"{name} should have {' or '.join(map(str, ndim))} dimensions, got shape {tuple(x.shape)}.")
    return x


def _grid(rows: list[str], cols: list[str], cell, corner: str = "") -> str:
    """An HTML table in a scroll box (sticky headers, as the scripts draw it); cell(i, j) -> (text, background,
    alpha, tooltip)."""
    head = (f'<tr><th class="llmlab-corner">{escape(corner)}</th>'
            + "".join(f'<th class="llmlab-col"><span class="llmlab-col-text">{escape(c)}</span></th>' for c in cols)
            + "</tr>")
    body = []
    for i, row in enumerate(rows):
        tds = []
        for j in range(len(cols)):
            text, background, alpha, tooltip = cell(i, j)
            tds.append(f'<td class="llmlab-cell" style="background:{background};color:{text_colour(alpha)}" '
                       f'title="{escape(tooltip)}" aria-label="{escape(tooltip)}">{escape(text)}</td>')
        body.append(f'<tr><th class="llmlab-row">{escape(row)}</th>{"".join(tds)}</tr>')
    return (f'<div class="llmlab-scroll"><table class="llmlab-grid"><thead>{head}</thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def _legend(label: str, vmin: float = 0.0, vmax: float = 1.0, diverging: bool = False) -> str:
    """The colour scale of a static table, as the scripts draw it."""
    ramp = ("linear-gradient(to right, rgba(214,39,40,1), rgba(214,39,40,0) 50%, rgba(31,119,180,0) 50%, "
            "rgba(31,119,180,1))" if diverging else "linear-gradient(to right, rgba(31,119,180,0), rgba(31,119,180,1))")
    return (f'<div class="llmlab-legend"><span class="llmlab-legend-text">{escape(label)}</span>'
            f'<span class="llmlab-legend-min">{vmin:g}</span><span class="llmlab-ramp" style="background:{ramp}"></span>'
            f'<span class="llmlab-legend-max">{vmax:g}</span></div>')


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
    """

    kind = "attention"

    def __init__(self, tokens, weights, layer_labels=None, title=None, layer: int = 0, head: int = 0,
                 query: int | None = None, hide_sink: bool = False):
        weights = _array(weights, "weights", (2, 3, 4))
        while weights.ndim < 4:
            weights = weights[None]
        n_layers, n_heads, T, T2 = weights.shape
        tokens = [show_token(t) for t in tokens]
        if T != T2 or T != len(tokens):
            raise ValueError(f"weights must be (layers, heads, T, T) with T = len(tokens) = {len(tokens)}; "
                             f"got shape {weights.shape}.")
        layer_labels = list(layer_labels) if layer_labels is not None else [f"layer {i}" for i in range(n_layers)]
        if len(layer_labels) != n_layers:
            raise ValueError(f"{len(layer_labels)} layer labels for {n_layers} layers.")
        if not (-n_layers <= layer < n_layers and 0 <= head <= n_heads):
            raise ValueError(f"layer={layer}, head={head} is outside {n_layers} layers x {n_heads} heads "
                             f"(head={n_heads} is the mean of the heads).")
        if query is not None and not -T <= query < T:
            raise ValueError(f"query={query} is outside the {T} positions.")
        layer = layer % n_layers                         # -1 is the last layer, as in Python
        self.weights = weights
        opening = weights[layer].mean(0) if head == n_heads else weights[layer, head]
        query = informative_row(opening) if query is None else int(query) % T
        super().__init__({"tokens": tokens, "layers": layer_labels, "n_heads": n_heads,
                          "weights": pack_unit_floats(weights), "layer": layer, "head": head, "query": query,
                          "hide_sink": bool(hide_sink)}, title)

    @classmethod
    def from_model(cls, model, tokenizer, prompt, layers=None, title=None, **kwargs) -> "AttentionView":
        """Run `prompt` (eager attention) and show the patterns of `layers` (default: all)."""
        from llmlab.inspection.capture import as_ids, capture

        layers = list(range(model.config.n_layers)) if layers is None else [l % model.config.n_layers for l in layers]
        _, cache = capture(model, tokenizer=tokenizer, prompt=prompt, names=["*hook_pattern"], layers=layers)
        weights = torch.stack([cache.pattern(l)[0] for l in layers])  # (L, H, T, T)
        tokens = show_token_ids(tokenizer, as_ids(model, tokenizer=tokenizer, prompt=prompt)[0]) if isinstance(prompt, str) \
            else cache.tokens
        return cls(tokens, weights, [f"layer {l}" for l in layers], title=title, **kwargs)

    def static_html(self, layer: int | None = None, head: int | None = None) -> str:
        """The map of one layer/head (head=None: mean of heads) as a plain table."""
        layer = self.data["layer"] if layer is None else layer
        head = self.data["head"] if head is None else head
        w = self.weights[layer].mean(0) if head is None or head >= self.data["n_heads"] else self.weights[layer, head]
        tokens = self.data["tokens"]

        def cell(i, j):
            return "", css_blue(w[i, j]), 0.0, f"{tokens[i]} → {tokens[j]}: {w[i, j]:.3f}"

        return _legend("attention weight") + _grid(tokens, tokens, cell, "query \\ key")


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
            m = _array(mask, f"mask {name!r}", tuple(range(1, 7)))
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

        return f'<div class="llmlab-readout">{escape(name)}</div>' + _grid(tokens, tokens, cell, "query \\ key")


def mask_view(masks: dict, tokens: list[str] | None = None, title: str | None = None) -> MaskView:
    """A view of attention masks: pick a mask, see the (T, T) grid, hover/tap/arrow to a cell to read
    which keys its query may attend to ("t5 may attend to t2..t5 (4 positions)").

    masks : dict name -> (T, T) tensor or array, row = query, column = key, True/1 = may attend
            (e.g. causal_mask(T), sliding_window_mask(T, w)); a (1, T) key mask (padding) is applied
            to every query. All masks must have the same T.
    tokens: labels of the T positions (default "t0" .. "t{T-1}").
    """
    return MaskView(masks, tokens, title)


class LensView(View):
    """Logit-lens table: layer x position, top-1 token shaded by probability, hover for top-k.

    Build it from `llmlab.inspection.lens.logit_lens(...)` with `LensView.from_lens(result)`, or
    from plain lists: top_tokens[layer][position] = [k token strings], top_probs the same shape.
    """

    kind = "lens"

    def __init__(self, positions, layer_labels, top_tokens, top_probs, target=None, target_rank=None,
                 target_prob=None, title=None):
        top_probs = _array(top_probs, "top_probs", (3,))
        n_layers, T, k = top_probs.shape
        if len(positions) != T or len(layer_labels) != n_layers:
            raise ValueError(f"top_probs has shape {top_probs.shape} (layers, positions, k) but there are "
                             f"{len(layer_labels)} layer labels and {len(positions)} positions.")
        self.top_tokens = [[[show_token(s) for s in cell] for cell in row] for row in top_tokens]
        self.top_probs = top_probs
        self.target_rank = None if target_rank is None else np.asarray(to_list(target_rank, None), dtype=np.int64)
        super().__init__({
            "positions": [show_token(p) for p in positions], "layers": [str(l) for l in layer_labels],
            "top_tokens": self.top_tokens, "top_probs": to_list(top_probs, 4),
            "target": None if target is None else show_token(target),
            "target_rank": None if target_rank is None else self.target_rank.tolist(),
            "target_prob": None if target_prob is None else to_list(target_prob, 5),
        }, title)

    @classmethod
    def from_model(cls, model, tokenizer, prompt, target=None, k: int = 5, title=None) -> "LensView":
        """Run the logit lens on `prompt` (see llmlab.inspection.lens.logit_lens) and show it."""
        from llmlab.inspection.lens import logit_lens

        return cls.from_lens(logit_lens(model, tokenizer=tokenizer, prompt=prompt, k=k, target=target), title=title,
                             tokenizer=tokenizer)

    @classmethod
    def from_lens(cls, lens, title=None, tokenizer=None) -> "LensView":
        """From a `LensResult` (llmlab.inspection.lens). With the tokenizer, the top tokens are shown from
        their bytes, so pieces of a character read "<e5><a4>" instead of "�"."""
        top_tokens = lens.top_tokens
        if tokenizer is not None and getattr(lens, "top_ids", None) is not None:
            ids = lens.top_ids.tolist() if hasattr(lens.top_ids, "tolist") else lens.top_ids
            top_tokens = [[show_token_ids(tokenizer, cell) for cell in row] for row in ids]
        return cls(lens.tokens, lens.layer_labels, top_tokens, lens.top_probs, target=lens.target,
                   target_rank=lens.target_rank, target_prob=lens.target_prob, title=title)

    def static_html(self) -> str:
        def cell(l, t):
            p = float(self.top_probs[l, t, 0])
            tips = ", ".join(f"{s} {q:.3f}" for s, q in zip(self.top_tokens[l][t], self.top_probs[l, t]))
            return self.top_tokens[l][t][0], css_blue(p), p, tips

        return _legend("top-1 probability") + _grid(self.data["layers"], self.data["positions"], cell,
                                                    "layer \\ token")


class SimilarityView(View):
    """Heatmap of a similarity matrix (cosine, CKA, ...) with row/column labels; hover for the value.

    Values below zero switch to a diverging red/blue scale. Labels are shown as given; pass
    token_labels=True when they are tokens (then " cat" is shown "␣cat", as tokens are everywhere).
    """

    kind = "similarity"

    def __init__(self, matrix, row_labels, col_labels=None, title=None, vmin=None, vmax=None,
                 show_values: bool = False, token_labels: bool = False, legend: str = "value"):
        matrix = _array(matrix, "matrix", (2,))
        col_labels = row_labels if col_labels is None else col_labels
        if matrix.shape != (len(row_labels), len(col_labels)):
            raise ValueError(f"matrix has shape {matrix.shape} but there are {len(row_labels)} row labels "
                             f"and {len(col_labels)} column labels.")
        vmin = float(min(matrix.min(), 0.0)) if vmin is None else float(vmin)
        vmax = float(max(matrix.max(), 1e-12)) if vmax is None else float(vmax)
        label = show_token if token_labels else str
        self.matrix = matrix
        super().__init__({"matrix": to_list(matrix, 4), "rows": [label(r) for r in row_labels],
                          "cols": [label(c) for c in col_labels], "vmin": vmin, "vmax": vmax,
                          "show_values": show_values, "legend": legend}, title)

    def static_html(self) -> str:
        vmin, vmax = self.data["vmin"], self.data["vmax"]
        rows, cols = self.data["rows"], self.data["cols"]
        scale = max(abs(vmin), abs(vmax))

        def cell(i, j):
            v = float(self.matrix[i, j])
            if vmin < 0:
                background, alpha = css_diverging(v, scale), abs(v) / scale
            else:
                alpha = (v - vmin) / ((vmax - vmin) or 1.0)
                background = css_blue(alpha)
            text = f"{v:.2f}" if self.data["show_values"] else ""
            return text, background, alpha, f"{rows[i]} vs {cols[j]}: {v:.4f}"

        legend = _legend(self.data["legend"], -scale if vmin < 0 else vmin, scale if vmin < 0 else vmax, vmin < 0)
        return legend + _grid(rows, cols, cell)


class TokensView(View):
    """Coloured tokenizer view: one row per tokenization, tokens alternate colours, ids on hover.

    rows: {"name": [(text, id), ...]} or a list of (text, id) pairs for a single row; a third item,
    the token's bytes, makes byte fragments exact ("<e5><a4>" instead of "�").
    `TokensView.from_tokenizers(text, {"SmolLM2": tok1, "Gemma 3": tok2})` encodes for you.
    """

    kind = "tokens"
    palette = ("#fde2a7", "#b9e3c6", "#f7c6d0", "#c6dbf7", "#e3d1f7", "#f7dcc6")

    def __init__(self, rows, title=None):
        if not isinstance(rows, dict):
            rows = {"tokens": rows}
        data_rows = []
        for name, pairs in rows.items():
            tokens = []
            for pair in pairs:
                text, token_id = pair[0], int(pair[1])
                raw = pair[2] if len(pair) > 2 else None
                special = pair[3] if len(pair) > 3 else None
                shown = show_token(bytes(raw) if raw is not None and not looks_like_text(text, raw) else text,
                                   special=special)
                tokens.append({"text": shown, "id": token_id,
                               "bytes": None if raw is None else " ".join(f"{b:02x}" for b in raw)})
            data_rows.append({"name": str(name), "tokens": tokens})
        super().__init__({"rows": data_rows}, title)

    @classmethod
    def from_tokenizers(cls, text: str, tokenizers: dict, title=None) -> "TokensView":
        """Encode `text` with each tokenizer and show each token as the book shows tokens."""
        rows = {}
        for name, tok in tokenizers.items():
            ids = tok.encode(text, add_special_tokens=False)
            raw = getattr(tok, "token_bytes", None)  # the bytes behind each token, when the tokenizer says
            specials = set(getattr(tok, "special_tokens", {}).values())
            rows[name] = [(tok.decode([i]), i) + ((raw[i], i in specials or None) if raw is not None else ())
                          for i in ids]
        return cls(rows, title=title)

    def static_html(self) -> str:
        parts = []
        for row in self.data["rows"]:
            spans = "".join(
                f'<span class="llmlab-tok" style="background:{self.palette[k % len(self.palette)]}" '
                f'title="id {t["id"]}">{escape(t["text"])}</span>' for k, t in enumerate(row["tokens"]))
            parts.append(f'<div class="llmlab-title">{escape(row["name"])} — {len(row["tokens"])} tokens</div>'
                         f"<div>{spans}</div>")
        return "".join(parts)


def looks_like_text(text: str, raw) -> bool:
    """True when a decoded token string already says everything its bytes say (no "�" from a fragment)."""
    return "\ufffd" not in text or b"\xef\xbf\xbd" in bytes(raw)


TEMPERATURE_STEP = 0.05          # the temperature slider's step: the grid the full-vocabulary sums are kept for
TEMPERATURE_MAX = 2.5
STORED_TOKENS = 500              # tokens per prompt whose exact logit and text the page keeps
BIN_WIDTH = 1 / 64               # the rest of the vocabulary: counts of logits per bin of this width


def temperature_grid() -> np.ndarray:
    return np.round(np.arange(1, round(TEMPERATURE_MAX / TEMPERATURE_STEP) + 1) * TEMPERATURE_STEP, 4)


def _full_vocabulary(logits: np.ndarray, n: int, stored: int):
    """What the page keeps of one full logit vector: the `stored` largest logits exactly (in order), a
    histogram of all the others, and log-sum-exp(logits / T) over the whole vocabulary for each T of the
    temperature grid."""
    order = np.argsort(-logits, kind="stable")
    z = logits[order]
    E = min(len(z), max(n, stored))
    tail = z[E:]
    if len(tail):
        top = float(tail[0])
        bins = np.floor((top - tail) / BIN_WIDTH).astype(np.int64)
        counts = np.bincount(bins).tolist()
    else:
        top, counts = 0.0, []
    grid = temperature_grid()
    scaled = z[None, :] / grid[:, None]
    peak = scaled.max(axis=1, keepdims=True)
    lse = (peak[:, 0] + np.log(np.exp(scaled - peak).sum(axis=1)))
    return order, z, E, {"vocab": int(len(z)), "hist_top": round(top, 6), "hist_width": BIN_WIDTH,
                         "hist_counts": counts, "lse": np.round(lse, 6).tolist()}


class SamplingView(View):
    """Temperature / top-k / top-p explorer over precomputed next-token logits (sliders run in JS).

    prompts: list of prompt strings; candidates[i]: the n candidate token strings for prompt i;
    logits[i]: their raw logits. `SamplingView.from_logits(prompts, logits, tokenizer, n=20)`
    takes full (vocab,) logit vectors: it shows the n most likely tokens plus an "all other tokens"
    bar for the rest of the vocabulary, applies top-k and top-p to the whole vocabulary (as
    llmlab.sampling does), and its "draw 10 samples" button samples from the whole vocabulary.
    Built from candidates alone, the candidates are the whole vocabulary.
    """

    kind = "sampling"

    def __init__(self, prompts, candidates, logits, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 title=None, tails=None, extra=None):
        logits = _array(logits, "logits", (2,))
        if logits.shape[0] != len(prompts) or any(len(c) != logits.shape[1] for c in candidates):
            raise ValueError(f"logits has shape {logits.shape} (prompts, candidates) but got {len(prompts)} prompts "
                             f"and candidate lists of lengths {[len(c) for c in candidates]}.")
        self.logits = logits
        self.full_logits = None
        data = {"prompts": list(prompts), "candidates": [[show_token(t) for t in c] for c in candidates],
                "logits": to_list(logits, 4), "temperature": temperature, "top_k": top_k, "top_p": top_p,
                "t_step": TEMPERATURE_STEP, "t_max": TEMPERATURE_MAX}
        if tails is not None:
            data["tails"] = tails
            data["extra"] = extra
        super().__init__(data, title)

    @classmethod
    def from_logits(cls, prompts, logits, tokenizer, n: int = 20, stored: int = STORED_TOKENS,
                    **kwargs) -> "SamplingView":
        """logits: (n_prompts, vocab) next-token logits; shows the n most likely tokens and the rest as one bar."""
        logits = _array(logits, "logits", (1, 2))
        logits = logits[None] if logits.ndim == 1 else logits
        candidates, top, tails, extra = [], [], [], []
        for row in logits:
            order, z, E, tail = _full_vocabulary(row, n, stored)
            shown = show_token_ids(tokenizer, order[:E])
            candidates.append(shown[:n])
            top.append(z[:n])
            tails.append(tail)
            extra.append({"tokens": shown[n:E], "logits": np.round(z[n:E], 4).tolist()})
        view = cls(list(prompts), candidates, np.array(top), tails=tails, extra=extra, **kwargs)
        view.full_logits = logits
        return view

    def distribution(self, prompt: int = 0, temperature: float | None = None, top_k: int | None = None,
                     top_p: float | None = None):
        """(probs of the shown candidates, keep flags, probability of all other tokens, number of tokens
        that can be drawn), computed on the whole vocabulary when the view has it."""
        from llmlab.sampling import filtered_probs

        temperature = self.data["temperature"] if temperature is None else temperature
        top_k = self.data["top_k"] if top_k is None else top_k
        top_p = self.data["top_p"] if top_p is None else top_p
        row = self.logits[prompt] if self.full_logits is None else self.full_logits[prompt]
        probs, keep = filtered_probs(row, temperature, top_k, top_p)
        n = self.logits.shape[1]
        if self.full_logits is None:
            return probs, keep, 0.0, int(keep.sum())
        order = np.argsort(-row, kind="stable")
        shown = order[:n]
        other = float(probs.sum() - probs[shown].sum())
        return probs[shown], keep[shown], max(other, 0.0), int(keep.sum())

    def static_html(self, prompt: int = 0, temperature: float | None = None, top_k: int | None = None,
                    top_p: float | None = None) -> str:
        probs, keep, other, kept = self.distribution(prompt, temperature, top_k, top_p)
        rows = []
        labels = list(self.data["candidates"][prompt])
        values = list(zip(labels, probs, keep, [""] * len(labels)))
        if self.full_logits is not None:
            vocab = self.full_logits.shape[1]
            values.append((f"all other {vocab - len(labels):,} tokens", other, other > 0, " llmlab-other"))
        for tok, p, k, extra_class in values:
            rows.append(f'<div class="llmlab-bar-row{extra_class}"><span class="llmlab-bar-label">{escape(tok)}</span>'
                        f'<span class="llmlab-bar-track"><span class="llmlab-bar{"" if k else " llmlab-off"}" '
                        f'style="width:{100 * float(p):.2f}%"></span></span>'
                        f'<span class="llmlab-bar-value">{p:.3f}</span></div>')
        vocab = self.logits.shape[1] if self.full_logits is None else self.full_logits.shape[1]
        return (f'<div class="llmlab-readout">"{escape(self.data["prompts"][prompt])}" → next token '
                f'({kept:,} of {vocab:,} tokens can be drawn)</div>' + "".join(rows))


class BPEMergeView(View):
    """Step through byte-pair-encoding merges: each step merges the most frequent adjacent pair.

    steps[0] = {"tokens": [...single symbols...]}, steps[i] = {"tokens", "pair", "merged", "count"}.
    `BPEMergeView.from_text("low lower lowest", 6)` runs the merges itself (on characters).
    """

    kind = "bpe"

    def __init__(self, steps, title=None):
        if not steps or "tokens" not in steps[0]:
            raise ValueError("steps must be a non-empty list of dicts, each with a 'tokens' list.")
        clean = [{"tokens": [show_token(t) for t in s["tokens"]],
                  "pair": None if s.get("pair") is None else [show_token(p) for p in s["pair"]],
                  "merged": None if s.get("merged") is None else show_token(s["merged"]),
                  "count": s.get("count")} for s in steps]
        super().__init__({"steps": clean}, title)

    @classmethod
    def from_text(cls, text: str, num_merges: int, title=None) -> "BPEMergeView":
        """Greedy BPE on the characters of `text`: 'aaab' -> merge ('a','a') -> ['aa', 'a', 'b'] -> ..."""
        from llmlab.tokenization.bpe import count_and_pick, get_pair_counts, merge

        vocab = sorted(set(text))
        strings = {i: s for i, s in enumerate(vocab)}      # id -> the text it stands for
        ids = [vocab.index(ch) for ch in text]
        steps = [{"tokens": [strings[i] for i in ids]}]
        for _ in range(num_merges):
            counts = get_pair_counts(ids)
            if not counts or max(counts.values()) < 2:
                break
            pair = count_and_pick(counts)  # most frequent; ties -> smallest pair, as the trainer does
            new_id = len(strings)
            strings[new_id] = strings[pair[0]] + strings[pair[1]]
            ids = merge(ids, pair, new_id)
            steps.append({"tokens": [strings[i] for i in ids], "pair": [strings[pair[0]], strings[pair[1]]],
                          "merged": strings[new_id], "count": counts[pair]})
        return cls(steps, title=title)

    def static_html(self) -> str:
        last = self.data["steps"][-1]
        spans = "".join(f'<span class="llmlab-tok" style="background:#eee">{escape(t)}</span>' for t in last["tokens"])
        return f'<div class="llmlab-readout">after {len(self.data["steps"]) - 1} merges:</div><div>{spans}</div>'
