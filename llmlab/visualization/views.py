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

from llmlab.visualization.html import (
    View, css_blue, css_diverging, escape, pack_unit_floats, text_colour, to_list, visible,
)


def _array(x, name: str, ndim: tuple[int, ...]) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    x = np.asarray(x, dtype=np.float64)
    if x.ndim not in ndim:
        raise ValueError(f"{name} should have {' or '.join(map(str, ndim))} dimensions, got shape {tuple(x.shape)}.")
    return x


def _grid(rows: list[str], cols: list[str], cell) -> str:
    """An HTML table; cell(i, j) -> (text, background, tooltip)."""
    head = "<tr><th></th>" + "".join(f'<th class="llmlab-col">{escape(c)}</th>' for c in cols) + "</tr>"
    body = []
    for i, row in enumerate(rows):
        tds = []
        for j in range(len(cols)):
            text, background, alpha, tooltip = cell(i, j)
            tds.append(f'<td class="llmlab-cell" style="background:{background};color:{text_colour(alpha)}" '
                       f'title="{escape(tooltip)}">{escape(text)}</td>')
        body.append(f'<tr><th class="llmlab-row">{escape(row)}</th>{"".join(tds)}</tr>')
    return f'<table class="llmlab-grid">{head}{"".join(body)}</table>'


class AttentionView(View):
    """Attention explorer: layer and head selectors, a T x T map, hover a token to see where it looks.

    weights: (n_layers, n_heads, T, T), (n_heads, T, T) or (T, T) attention probabilities,
             e.g. `torch.stack([cache.pattern(l)[0] for l in range(n)])`.
    """

    kind = "attention"

    def __init__(self, tokens, weights, layer_labels=None, title=None, layer: int = 0, head: int = 0):
        weights = _array(weights, "weights", (2, 3, 4))
        while weights.ndim < 4:
            weights = weights[None]
        n_layers, n_heads, T, T2 = weights.shape
        tokens = [visible(t) for t in tokens]
        if T != T2 or T != len(tokens):
            raise ValueError(f"weights must be (layers, heads, T, T) with T = len(tokens) = {len(tokens)}; "
                             f"got shape {weights.shape}.")
        layer_labels = list(layer_labels) if layer_labels is not None else [f"layer {i}" for i in range(n_layers)]
        if len(layer_labels) != n_layers:
            raise ValueError(f"{len(layer_labels)} layer labels for {n_layers} layers.")
        self.weights = weights
        super().__init__({"tokens": tokens, "layers": layer_labels, "n_heads": n_heads,
                          "weights": pack_unit_floats(weights), "layer": layer, "head": head}, title)

    @classmethod
    def from_model(cls, model, tokenizer, prompt, layers=None, title=None, **kwargs) -> "AttentionView":
        """Run `prompt` (eager attention) and show the patterns of `layers` (default: all)."""
        from llmlab.inspection.capture import capture

        layers = list(range(model.config.n_layers)) if layers is None else [l % model.config.n_layers for l in layers]
        _, cache = capture(model, prompt, tokenizer, names=["*hook_pattern"], layers=layers)
        weights = torch.stack([cache.pattern(l)[0] for l in layers])  # (L, H, T, T)
        return cls(cache.tokens, weights, [f"layer {l}" for l in layers], title=title, **kwargs)

    def static_html(self, layer: int | None = None, head: int | None = None) -> str:
        """The map of one layer/head (head=None: mean of heads) as a plain table."""
        layer = self.data["layer"] if layer is None else layer
        head = self.data["head"] if head is None else head
        w = self.weights[layer].mean(0) if head is None or head >= self.data["n_heads"] else self.weights[layer, head]
        tokens = self.data["tokens"]

        def cell(i, j):
            return "", css_blue(w[i, j]), 0.0, f"{tokens[i]} → {tokens[j]}: {w[i, j]:.3f}"

        return _grid(tokens, tokens, cell)


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
        self.top_tokens = [[[visible(s) for s in cell] for cell in row] for row in top_tokens]
        self.top_probs = top_probs
        self.target_rank = None if target_rank is None else np.asarray(to_list(target_rank, None), dtype=np.int64)
        super().__init__({
            "positions": [visible(p) for p in positions], "layers": list(layer_labels),
            "top_tokens": self.top_tokens, "top_probs": to_list(top_probs, 4),
            "target": None if target is None else visible(target),
            "target_rank": None if target_rank is None else self.target_rank.tolist(),
            "target_prob": None if target_prob is None else to_list(target_prob, 5),
        }, title)

    @classmethod
    def from_model(cls, model, tokenizer, prompt, target=None, k: int = 5, title=None) -> "LensView":
        """Run the logit lens on `prompt` (see llmlab.inspection.lens.logit_lens) and show it."""
        from llmlab.inspection.lens import logit_lens

        return cls.from_lens(logit_lens(model, prompt, tokenizer, k=k, target=target), title=title)

    @classmethod
    def from_lens(cls, lens, title=None) -> "LensView":
        """From a `LensResult` (llmlab.inspection.lens)."""
        return cls(lens.tokens, lens.layer_labels, lens.top_tokens, lens.top_probs, target=lens.target,
                   target_rank=lens.target_rank, target_prob=lens.target_prob, title=title)

    def static_html(self) -> str:
        def cell(l, t):
            p = float(self.top_probs[l, t, 0])
            tips = ", ".join(f"{s} {q:.3f}" for s, q in zip(self.top_tokens[l][t], self.top_probs[l, t]))
            return self.top_tokens[l][t][0], css_blue(p), p, tips

        return _grid(self.data["layers"], self.data["positions"], cell)


class SimilarityView(View):
    """Heatmap of a similarity matrix (cosine, CKA, ...) with row/column labels; hover for the value.

    Values below zero switch to a diverging red/blue scale.
    """

    kind = "similarity"

    def __init__(self, matrix, row_labels, col_labels=None, title=None, vmin=None, vmax=None,
                 show_values: bool = False):
        matrix = _array(matrix, "matrix", (2,))
        col_labels = row_labels if col_labels is None else col_labels
        if matrix.shape != (len(row_labels), len(col_labels)):
            raise ValueError(f"matrix has shape {matrix.shape} but there are {len(row_labels)} row labels "
                             f"and {len(col_labels)} column labels.")
        vmin = float(min(matrix.min(), 0.0)) if vmin is None else float(vmin)
        vmax = float(max(matrix.max(), 1e-12)) if vmax is None else float(vmax)
        self.matrix = matrix
        super().__init__({"matrix": to_list(matrix, 4), "rows": [visible(str(r)) for r in row_labels],
                          "cols": [visible(str(c)) for c in col_labels], "vmin": vmin, "vmax": vmax,
                          "show_values": show_values}, title)

    def static_html(self) -> str:
        vmin, vmax = self.data["vmin"], self.data["vmax"]
        rows, cols = self.data["rows"], self.data["cols"]

        def cell(i, j):
            v = float(self.matrix[i, j])
            if vmin < 0:
                scale = max(abs(vmin), abs(vmax))
                background, alpha = css_diverging(v, scale), abs(v) / scale
            else:
                alpha = (v - vmin) / ((vmax - vmin) or 1.0)
                background = css_blue(alpha)
            text = f"{v:.2f}" if self.data["show_values"] else ""
            return text, background, alpha, f"{rows[i]} vs {cols[j]}: {v:.4f}"

        return _grid(rows, cols, cell)


class TokensView(View):
    """Coloured tokenizer view: one row per tokenization, tokens alternate colours, ids on hover.

    rows: {"name": [(text, id), ...]} or a list of (text, id) pairs for a single row.
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
                if raw is not None and "\ufffd" in text and b"\xef\xbf\xbd" not in raw:
                    # a piece of a multi-byte character (byte-level BPE): show its bytes, not "�"
                    text = bytes(raw).decode("utf-8", errors="backslashreplace")
                tokens.append({"text": text.replace("\n", "\u21b5\n"), "id": token_id,
                               "bytes": None if raw is None else " ".join(f"{b:02x}" for b in raw)})
            data_rows.append({"name": str(name), "tokens": tokens})
        super().__init__({"rows": data_rows}, title)

    @classmethod
    def from_tokenizers(cls, text: str, tokenizers: dict, title=None) -> "TokensView":
        """Encode `text` with each tokenizer and show each token as the text it decodes to."""
        rows = {}
        for name, tok in tokenizers.items():
            ids = tok.encode(text, add_special_tokens=False)
            raw = getattr(tok, "token_bytes", None)  # the bytes behind each token, when the tokenizer says
            rows[name] = [(tok.decode([i]), i) + ((raw[i],) if raw is not None else ()) for i in ids]
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


class SamplingView(View):
    """Temperature / top-k / top-p explorer over precomputed next-token logits (sliders run in JS).

    prompts: list of prompt strings; candidates[i]: the n candidate token strings for prompt i;
    logits[i]: their raw logits. `SamplingView.from_logits(prompts, logits, tokenizer, n=20)`
    picks the n most likely tokens from full (vocab,) logit vectors.
    """

    kind = "sampling"

    def __init__(self, prompts, candidates, logits, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 title=None):
        logits = _array(logits, "logits", (2,))
        if logits.shape[0] != len(prompts) or any(len(c) != logits.shape[1] for c in candidates):
            raise ValueError(f"logits has shape {logits.shape} (prompts, candidates) but got {len(prompts)} prompts "
                             f"and candidate lists of lengths {[len(c) for c in candidates]}.")
        self.logits = logits
        super().__init__({"prompts": list(prompts), "candidates": [[visible(t) for t in c] for c in candidates],
                          "logits": to_list(logits, 4), "temperature": temperature, "top_k": top_k,
                          "top_p": top_p}, title)

    @classmethod
    def from_logits(cls, prompts, logits, tokenizer, n: int = 20, **kwargs) -> "SamplingView":
        """logits: (n_prompts, vocab) next-token logits; keeps the n most likely candidates per prompt."""
        logits = _array(logits, "logits", (1, 2))
        logits = logits[None] if logits.ndim == 1 else logits
        order = np.argsort(-logits, axis=-1)[:, :n]
        candidates = [[tokenizer.decode([int(i)]) for i in row] for row in order]
        return cls(list(prompts), candidates, np.take_along_axis(logits, order, -1), **kwargs)

    def static_html(self, prompt: int = 0, temperature: float | None = None, top_k: int | None = None,
                    top_p: float | None = None) -> str:
        from llmlab.visualization.widgets import filtered_probs

        temperature = self.data["temperature"] if temperature is None else temperature
        top_k = self.data["top_k"] if top_k is None else top_k
        top_p = self.data["top_p"] if top_p is None else top_p
        probs, keep = filtered_probs(self.logits[prompt], temperature, top_k, top_p)
        rows = []
        for tok, p, k in zip(self.data["candidates"][prompt], probs, keep):
            width = max(1, round(float(p) * 400))
            rows.append(f'<div class="llmlab-bar-row"><span class="llmlab-bar-label">{escape(tok)}</span>'
                        f'<span class="llmlab-bar{"" if k else " llmlab-off"}" style="width:{width}px"></span>'
                        f'<span class="llmlab-bar-value">{p:.3f}</span></div>')
        return f'<div class="llmlab-readout">"{escape(self.data["prompts"][prompt])}" → next token</div>' + "".join(rows)


class BPEMergeView(View):
    """Step through byte-pair-encoding merges: each step merges the most frequent adjacent pair.

    steps[0] = {"tokens": [...single symbols...]}, steps[i] = {"tokens", "pair", "merged", "count"}.
    `BPEMergeView.from_text("low lower lowest", 6)` runs the merges itself (on characters).
    """

    kind = "bpe"

    def __init__(self, steps, title=None):
        if not steps or "tokens" not in steps[0]:
            raise ValueError("steps must be a non-empty list of dicts, each with a 'tokens' list.")
        clean = [{"tokens": [visible(t) for t in s["tokens"]],
                  "pair": None if s.get("pair") is None else [visible(p) for p in s["pair"]],
                  "merged": None if s.get("merged") is None else visible(s["merged"]),
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
