"""The sampling view: temperature, top-k and top-p over next-token logits, with sliders that run in
the page."""
from __future__ import annotations

import numpy as np

from llmlab.sampling import check_sampling
from llmlab.visualization.display import show_token, show_token_ids
from llmlab.visualization.grid import as_array
from llmlab.visualization.html import View, escape, live_data, to_list


TEMPERATURE_STEP = 0.05          # the temperature slider's step: the grid the full-vocabulary sums are kept for
TEMPERATURE_MAX = 2.5
STORED_TOKENS = 500              # tokens per prompt whose exact logit and text the page keeps
BIN_WIDTH = 1 / 64               # the rest of the vocabulary: counts of logits per bin of this width


def temperature_grid() -> np.ndarray:
    return np.round(np.arange(1, round(TEMPERATURE_MAX / TEMPERATURE_STEP) + 1) * TEMPERATURE_STEP, 4)


def _full_vocabulary(logits: np.ndarray, n: int, stored: int):
    """What the page keeps of one full logit vector: the `stored` largest logits exactly (in order), a
    histogram of all the others, and log-sum-exp((logits - top logit) / T) over the whole vocabulary for
    each T of the temperature grid."""
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
    # log-sum-exp relative to the top logit (peak = z_top / T), so the page's top-token weight is exactly 1
    # and no probability it shows can exceed 1, whatever the rounding of the logits it keeps
    lse = np.log(np.exp(scaled - peak).sum(axis=1))
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
    live: in the built book, a prompt box that reruns the view on the live SmolLM2-135M (None: on for
    views built with from_logits, whose tokens are a real vocabulary).
    """

    kind = "sampling"

    def __init__(self, prompts, candidates, logits, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 title=None, tails=None, extra=None, live: bool | None = None):
        logits = as_array(logits, "logits", (2,))
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
        data.update(live_data(tails is not None if live is None else live, str(prompts[0])))
        super().__init__(data, title)

    @classmethod
    def from_logits(cls, prompts, logits, tokenizer, n: int = 20, stored: int = STORED_TOKENS,
                    **kwargs) -> "SamplingView":
        """logits: (n_prompts, vocab) next-token logits; shows the n most likely tokens and the rest as one bar."""
        logits = as_array(logits, "logits", (1, 2))
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


class WriteView(View):
    """A box where the book's live model writes in the reader's browser (the built book only).

    mode "write": continue a text with the sampling sliders; "chat": ask SmolLM2 a question;
    "cache": write the same greedy continuation with and without the KV cache and plot the time of
    each token as the text grows, next to the cache's size in bytes (chapter 10). In Jupyter the box
    says to use llmlab.generate instead (the model runs in Python there).
    """

    kind = "write"
    MODES = ("write", "chat", "cache")

    def __init__(self, mode: str = "write", prompt: str | None = None, title=None, max_new_tokens: int = 60,
                 temperature: float = 0.7, top_k: int = 0, top_p: float = 0.95, min_p: float = 0.0):
        if mode not in self.MODES:
            raise ValueError(f"mode must be one of {self.MODES}; got {mode!r}.")
        if not isinstance(max_new_tokens, int) or not 1 <= max_new_tokens <= 500:
            raise ValueError(f"max_new_tokens must be a whole number from 1 to 500; got {max_new_tokens!r}.")
        check_sampling(temperature, top_k or None, top_p, min_p or None)
        defaults = {"write": "Once upon a time", "chat": "What is the capital of France?",
                    "cache": "The history of the printing press begins"}
        super().__init__({"mode": mode, "prompt": defaults[mode] if prompt is None else str(prompt),
                          "max_new_tokens": max_new_tokens, "temperature": temperature, "top_k": top_k,
                          "top_p": top_p, "min_p": min_p}, title)

    def static_html(self) -> str:
        return ("<div class='llmlab-note'>In the built book, this box lets SmolLM2-135M write in your browser. "
                "In Python, use <code>llmlab.generate</code>.</div>")
