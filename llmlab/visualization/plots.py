"""Matplotlib figures for the text: an attention map, a logit-lens heatmap, a similarity matrix.

Each function draws on `ax` (or a new figure) and returns the Axes, so a chapter can put
several side by side:

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    plot_attention(cache.pattern(3)[0, 5], tokens, ax=axes[0], title="layer 3, head 5")
    plot_similarity(position_similarity(cache, 3), tokens, ax=axes[1])
"""
from __future__ import annotations

import numpy as np

from llmlab.visualization.display import show_token


def _numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def _axes(ax, size):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=size)
    return ax


def plot_attention(weights, tokens, ax=None, title: str | None = None):
    """Heatmap of one (T, T) attention pattern: row = query token, column = the key it looks at."""
    w = _numpy(weights)
    if w.ndim != 2 or w.shape != (len(tokens), len(tokens)):
        raise ValueError(f"weights must be (T, T) with T = len(tokens) = {len(tokens)}; got {w.shape}. "
                         "Pick one layer and head, e.g. cache.pattern(layer)[0, head].")
    T = len(tokens)
    ax = _axes(ax, (0.35 * T + 2, 0.35 * T + 1.5))
    image = ax.imshow(w, cmap="Blues", vmin=0.0, vmax=1.0)
    labels = [show_token(t) for t in tokens]
    ax.set_xticks(range(T), labels, rotation=90)
    ax.set_yticks(range(T), labels)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    return ax


def plot_lens(lens, ax=None, title: str | None = None, annotate: bool = True):
    """Logit lens as a heatmap: rows = layers, columns = positions, colour = top-1 probability,
    text = top-1 token. `lens` is a LensResult from llmlab.inspection.lens.logit_lens."""
    probs = _numpy(lens.top_probs)[:, :, 0]  # (L+1, P)
    n_rows, n_cols = probs.shape
    ax = _axes(ax, (1.1 * n_cols + 2, 0.32 * n_rows + 1.5))
    image = ax.imshow(probs, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    if annotate:
        for r in range(n_rows):
            for c in range(n_cols):
                ax.text(c, r, show_token(lens.top_tokens[r][c][0])[:10], ha="center", va="center", fontsize=7,
                        color="white" if probs[r, c] > 0.55 else "black")
    ax.set_xticks(range(n_cols), [show_token(t) for t in lens.tokens], rotation=45, ha="right")
    ax.set_yticks(range(n_rows), lens.layer_labels)
    ax.set_xlabel("position (input token)")
    ax.set_ylabel("read out after")
    if title:
        ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="top-1 probability")
    return ax


def plot_similarity(matrix, labels, col_labels=None, ax=None, title: str | None = None, annotate: bool = False):
    """Heatmap of a similarity matrix (cosine or CKA); values below 0 use a red/blue scale."""
    m = _numpy(matrix)
    col_labels = labels if col_labels is None else col_labels
    if m.shape != (len(labels), len(col_labels)):
        raise ValueError(f"matrix has shape {m.shape} but there are {len(labels)} row and {len(col_labels)} column labels.")
    ax = _axes(ax, (0.35 * m.shape[1] + 2.5, 0.35 * m.shape[0] + 1.5))
    if m.min() < 0:
        bound = float(np.abs(m).max())
        image = ax.imshow(m, cmap="RdBu", vmin=-bound, vmax=bound)
    else:
        image = ax.imshow(m, cmap="Blues", vmin=0.0, vmax=max(float(m.max()), 1e-12))
    if annotate:
        for r in range(m.shape[0]):
            for c in range(m.shape[1]):
                ax.text(c, r, f"{m[r, c]:.2f}", ha="center", va="center", fontsize=7)
    # labels, not tokens: shown as given (no ␣), unlike the token axes of plot_attention and plot_lens
    ax.set_xticks(range(m.shape[1]), [str(t) for t in col_labels], rotation=90)
    ax.set_yticks(range(m.shape[0]), [str(t) for t in labels])
    if title:
        ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax
