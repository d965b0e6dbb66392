"""Views that are a labelled table of numbers: the logit lens (layer x position, the top token of
each cell) and a similarity matrix (cosine, CKA, ...)."""
from __future__ import annotations

import numpy as np

from llmlab.visualization.display import show_token, show_token_ids, text_of_shown
from llmlab.visualization.grid import as_array, grid_html, legend_html
from llmlab.visualization.html import View, css_blue, css_diverging, live_data, to_list


class LensView(View):
    """Logit-lens table: layer x position, top-1 token shaded by probability, hover for top-k.

    Build it from `llmlab.inspection.lens.logit_lens(...)` with `LensView.from_lens(result)`, or
    from plain lists: top_tokens[layer][position] = [k token strings], top_probs the same shape.
    live: in the built book, a prompt box that shows the live SmolLM2-135M's lens at the last 8 positions
    of the reader's prompt (default on). live_steer=(vector, layer, scale): the view shows a steered model,
    and the live run adds the same vector; pass live=False where the view shows something else the live
    model does not compute.
    """

    kind = "lens"

    def __init__(self, positions, layer_labels, top_tokens, top_probs, target=None, target_rank=None,
                 target_prob=None, title=None, live: bool = True, live_steer=None):
        top_probs = as_array(top_probs, "top_probs", (3,))
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
            **live_data(live, text_of_shown([show_token(p) for p in positions]), steer=live_steer),
        }, title)

    @classmethod
    def from_model(cls, model, tokenizer, prompt, target=None, k: int = 5, title=None, live: bool = True,
                   live_steer=None) -> "LensView":
        """Run the logit lens on `prompt` (see llmlab.inspection.lens.logit_lens) and show it."""
        from llmlab.inspection import logit_lens

        return cls.from_lens(logit_lens(model, tokenizer=tokenizer, prompt=prompt, k=k, target=target), title=title,
                             tokenizer=tokenizer, live=live, live_steer=live_steer)

    @classmethod
    def from_lens(cls, lens, title=None, tokenizer=None, live: bool = True, live_steer=None) -> "LensView":
        """From a `LensResult` (llmlab.inspection.lens). With the tokenizer, the top tokens are shown from
        their bytes, so pieces of a character read "<e5><a4>" instead of "�"."""
        top_tokens = lens.top_tokens
        if tokenizer is not None and getattr(lens, "top_ids", None) is not None:
            ids = lens.top_ids.tolist() if hasattr(lens.top_ids, "tolist") else lens.top_ids
            top_tokens = [[show_token_ids(tokenizer, cell) for cell in row] for row in ids]
        return cls(lens.tokens, lens.layer_labels, top_tokens, lens.top_probs, target=lens.target,
                   target_rank=lens.target_rank, target_prob=lens.target_prob, title=title, live=live,
                   live_steer=live_steer)

    def static_html(self) -> str:
        def cell(l, t):
            p = float(self.top_probs[l, t, 0])
            tips = ", ".join(f"{s} {q:.3f}" for s, q in zip(self.top_tokens[l][t], self.top_probs[l, t]))
            return self.top_tokens[l][t][0], css_blue(p), p, tips

        return legend_html("top-1 probability") + grid_html(self.data["layers"], self.data["positions"], cell,
                                                            "block \\ token")


class SimilarityView(View):
    """Heatmap of a similarity matrix (cosine, CKA, ...) with row/column labels; hover for the value.

    Values below zero switch to a diverging red/blue scale. Labels are shown as given; pass
    token_labels=True when they are tokens (then " cat" is shown "␣cat", as tokens are everywhere).
    center: a diverging scale around this value instead (e.g. 1.0 for ratios: 1 = no effect is white,
    above is blue, below red); vmin/vmax then only say where the colours saturate, and every value is
    shown as it is (never capped).
    """

    kind = "similarity"

    def __init__(self, matrix, row_labels, col_labels=None, title=None, vmin=None, vmax=None,
                 show_values: bool = False, token_labels: bool = False, legend: str = "value",
                 center: float | None = None):
        matrix = as_array(matrix, "matrix", (2,))
        col_labels = row_labels if col_labels is None else col_labels
        if matrix.shape != (len(row_labels), len(col_labels)):
            raise ValueError(f"matrix has shape {matrix.shape} but there are {len(row_labels)} row labels "
                             f"and {len(col_labels)} column labels.")
        if center is not None:
            center = float(center)
            vmin = float(matrix.min()) if vmin is None else float(vmin)
            vmax = float(matrix.max()) if vmax is None else float(vmax)
        vmin = float(min(matrix.min(), 0.0)) if vmin is None else float(vmin)
        vmax = float(max(matrix.max(), 1e-12)) if vmax is None else float(vmax)
        label = show_token if token_labels else str
        self.matrix = matrix
        super().__init__({"matrix": to_list(matrix, 4), "rows": [label(r) for r in row_labels],
                          "cols": [label(c) for c in col_labels], "vmin": vmin, "vmax": vmax,
                          "show_values": show_values, "legend": legend, "center": center}, title)

    def static_html(self) -> str:
        vmin, vmax, center = self.data["vmin"], self.data["vmax"], self.data["center"]
        rows, cols = self.data["rows"], self.data["cols"]
        scale = max(abs(vmin), abs(vmax))
        if center is not None:
            span = max(abs(vmax - center), abs(vmin - center), 1e-12)

        def cell(i, j):
            v = float(self.matrix[i, j])
            if center is not None:
                background, alpha = css_diverging(v - center, span), min(abs(v - center) / span, 1.0)
            elif vmin < 0:
                background, alpha = css_diverging(v, scale), abs(v) / scale
            else:
                alpha = (v - vmin) / ((vmax - vmin) or 1.0)
                background = css_blue(alpha)
            text = f"{v:.2f}" if self.data["show_values"] else ""
            return text, background, alpha, f"{rows[i]} vs {cols[j]}: {v:.4f}"

        if center is not None:
            legend = legend_html(self.data["legend"], center - span, center + span, True)
        else:
            legend = legend_html(self.data["legend"], -scale if vmin < 0 else vmin, scale if vmin < 0 else vmax, vmin < 0)
        return legend + grid_html(rows, cols, cell)
