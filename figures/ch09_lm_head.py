"""Chapter 9 diagram: the last vector h (width d, like every row of the head) is scored against
every row of the LM head (the embedding table, tied); temperature divides the logits and the filters
set the unlikely ones to -inf; softmax turns what is left into probabilities that sum to 1; one draw
picks the next token.

Run from the repository root: python figures/ch09_lm_head.py
writes figures/generated/ch09_lm_head.svg
and, in Chinese, ch09_lm_head.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch09_lm_head.svg")
ZH = {
    "h (width d)": "h（宽度 d）", "LM head W_U: one row per token,\neach of width d (= embedding table, tied)":
        "语言模型头 W_U：每个词元一行，\n每行宽度 d（= 嵌入表，权重绑定）",
    "... V rows": "... 共 V 行", "row · h\nfor\nevery row": "每一行\n都与 h\n做点积", "logits z": "logits z",
    "÷ τ, then\ntop-k / top-p:\nthe rest → −∞": "÷ τ，再做\ntop-k / top-p：\n其余 → −∞",
    "kept logits": "保留的 logits", "softmax": "softmax",
    "probabilities\n(the kept ones sum to 1)": "概率\n（保留的加起来为 1）",
    "draw one:\n\" Paris\"": "采样一个：\n\" Paris\"", "greedy (τ = 0):\nalways the top": "贪心（τ = 0）：\n总是取概率最高的",
}
VECTOR, HEAD, LOGIT, PROB, DROPPED = "#4c72b0", "#8172b3", "#dd8452", "#55a868", "#cccccc"
TOKENS = [" Paris", " the", " a", " France", " located", " one"]
LOGITS = np.array([17.0, 14.5, 13.9, 12.8, 12.1, 11.0])
N_KEPT = 3                         # the filters keep the top three in this picture
CELLS, CELL = 8, 0.2               # a vector of width d, drawn as 8 cells


def arrow(ax, start, end, text=""):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color="#666666", lw=1))
    if text:
        ax.text((start[0] + end[0]) / 2, start[1] - 0.12, text, ha="center", va="top", fontsize=7, color="#333333")


def row_y(r):
    return 2.6 - r * 0.4


def vector(ax, x0, y, colour):
    """A vector of width d: a row of cells."""
    for c in range(CELLS):
        ax.add_patch(Rectangle((x0 + c * CELL, y), CELL, 0.36, facecolor=colour, edgecolor="white"))


def bars(ax, x0, values, scale, colour, fmt, kept=None):
    """One horizontal bar per candidate token, its value written at its end; a dropped one shows `fmt` of None."""
    for r, v in enumerate(values):
        y = row_y(r)
        if kept is not None and not kept[r]:
            ax.add_patch(Rectangle((x0, y), 0.3, 0.36, facecolor=DROPPED, edgecolor="white"))
            ax.text(x0 + 0.35, y + 0.18, fmt[1], va="center", fontsize=7, color="#777777")
            continue
        ax.add_patch(Rectangle((x0, y), scale * v, 0.36, facecolor=colour, edgecolor="white"))
        ax.text(x0 + scale * v + 0.05, y + 0.18, (fmt[0] if kept is not None else fmt).format(v), va="center",
                fontsize=7)


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, ax = plt.subplots(figsize=(13, 3.6))
    # h: the final vector, as wide as one row of the head
    vector(ax, 0.0, row_y(2) - 0.2, VECTOR)
    ax.text(0.8, row_y(2) + 0.3, t("h (width d)"), ha="center", fontsize=8)
    arrow(ax, (1.7, row_y(2) - 0.02), (2.2, row_y(2) - 0.02))
    # W_U: one row per token, each of width d
    for r, token in enumerate(TOKENS):
        vector(ax, 2.3, row_y(r), HEAD)
        ax.text(3.1, row_y(r) + 0.18, token, ha="center", va="center", fontsize=7, color="white", fontweight="bold",
                bbox=dict(facecolor=HEAD, edgecolor="none", pad=0.5))
    ax.text(3.1, 3.15, t("LM head W_U: one row per token,\neach of width d (= embedding table, tied)"),
            ha="center", fontsize=8)
    ax.text(3.1, 0.2, t("... V rows"), ha="center", fontsize=7)
    arrow(ax, (4.0, 1.8), (4.7, 1.8), t("row · h\nfor\nevery row"))
    # logits
    bars(ax, 4.8, LOGITS, 0.08, LOGIT, "{:.1f}")
    ax.text(5.5, 3.15, t("logits z"), ha="center", fontsize=8)
    arrow(ax, (6.7, 1.8), (7.8, 1.8), t("÷ τ, then\ntop-k / top-p:\nthe rest → −∞"))
    # the filters act on the logits: the dropped ones become -inf
    kept = np.arange(len(LOGITS)) < N_KEPT
    bars(ax, 7.9, LOGITS, 0.08, LOGIT, ("{:.1f}", "−∞"), kept=kept)
    ax.text(8.6, 3.15, t("kept logits"), ha="center", fontsize=8)
    arrow(ax, (9.8, 1.8), (10.5, 1.8), t("softmax"))
    # softmax of what is left: exp(-inf) = 0, the kept probabilities sum to 1
    probs = np.where(kept, np.exp(LOGITS - LOGITS.max()), 0.0)
    probs /= probs.sum()
    bars(ax, 10.6, probs, 1.8, PROB, ("{:.2f}", "0"), kept=kept)
    ax.text(11.5, 3.15, t("probabilities\n(the kept ones sum to 1)"), ha="center", fontsize=8)
    arrow(ax, (12.8, row_y(0) + 0.18), (13.2, row_y(0) + 0.18))
    ax.text(13.3, row_y(0) + 0.18, t("draw one:\n\" Paris\""), va="center", fontsize=8, fontweight="bold")
    ax.text(13.3, 1.6, t("greedy (τ = 0):\nalways the top"), va="center", fontsize=7, color="#555555")
    ax.set_xlim(-0.1, 14.7)
    ax.set_ylim(0.0, 3.7)
    ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
