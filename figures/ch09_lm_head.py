"""Chapter 9 diagram: the last vector h is scored against every row of the LM head (the embedding
table, tied), softmax turns the scores into probabilities, temperature and filters reshape them, and
one draw picks the next token.

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
    "h\n(width d)": "h\n（宽度 d）", "LM head W_U\none row per token\n(= embedding table, tied)":
        "语言模型头 W_U\n每个词元一行\n（= 嵌入表，权重绑定）",
    "... V rows": "... 共 V 行", "row · h\nfor\nevery row": "每一行\n都与 h\n做点积", "logits z": "logits z",
    "softmax\n(z / τ)": "softmax\n(z / τ)", "probabilities": "概率", "top-k\ntop-p": "top-k\ntop-p", "kept": "保留",
    "draw one:\n\" Paris\"": "采样一个：\n\" Paris\"", "greedy (τ = 0):\nalways the top": "贪心（τ = 0）：\n总是取概率最高的",
}
VECTOR, HEAD, LOGIT, PROB, KEPT, DROPPED = "#4c72b0", "#8172b3", "#dd8452", "#55a868", "#55a868", "#cccccc"
TOKENS = [" Paris", " the", " a", " France", " located", " one"]
LOGITS = np.array([17.0, 14.5, 13.9, 12.8, 12.1, 11.0])


def arrow(ax, start, end, text=""):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color="#666666", lw=1))
    if text:
        ax.text((start[0] + end[0]) / 2, start[1] - 0.12, text, ha="center", va="top", fontsize=7, color="#333333")


def bars(ax, x0, values, scale, colour, fmt):
    """One horizontal bar per candidate token, its value written at its end."""
    for r, v in enumerate(values):
        y = 2.6 - r * 0.4
        ax.add_patch(Rectangle((x0, y), scale * v, 0.36, facecolor=colour, edgecolor="white"))
        ax.text(x0 + scale * v + 0.05, y + 0.18, fmt.format(v), va="center", fontsize=7)


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, ax = plt.subplots(figsize=(10, 3.6))
    # h: the final vector
    for i in range(6):
        ax.add_patch(Rectangle((0, 0.6 + i * 0.4), 0.4, 0.38, facecolor=VECTOR, edgecolor="white"))
    ax.text(0.2, 3.15, t("h\n(width d)"), ha="center", fontsize=8)
    arrow(ax, (0.5, 1.8), (1.2, 1.8))
    # W_U: one row per token
    for r, token in enumerate(TOKENS):
        y = 2.6 - r * 0.4
        ax.add_patch(Rectangle((1.3, y), 1.6, 0.36, facecolor=HEAD, edgecolor="white"))
        ax.text(1.25, y + 0.18, token, ha="right", va="center", fontsize=7)
    ax.text(2.1, 3.15, t("LM head W_U\none row per token\n(= embedding table, tied)"), ha="center", fontsize=8)
    ax.text(2.1, 0.2, t("... V rows"), ha="center", fontsize=7)
    arrow(ax, (3.0, 1.8), (3.6, 1.8), t("row · h\nfor\nevery row"))
    # logits
    bars(ax, 3.7, LOGITS, 0.08, LOGIT, "{:.1f}")
    ax.text(4.4, 3.15, t("logits z"), ha="center", fontsize=8)
    arrow(ax, (5.4, 1.8), (6.0, 1.8), t("softmax\n(z / τ)"))
    probs = np.exp(LOGITS - LOGITS.max())
    probs /= probs.sum()
    bars(ax, 6.1, probs, 2.2, PROB, "{:.2f}")
    ax.text(7.0, 3.15, t("probabilities"), ha="center", fontsize=8)
    arrow(ax, (8.5, 1.8), (9.1, 1.8), t("top-k\ntop-p"))
    for r, p in enumerate(probs):
        y = 2.6 - r * 0.4
        kept = r < 3
        ax.add_patch(Rectangle((9.2, y), 0.36, 0.36, facecolor=KEPT if kept else DROPPED, edgecolor="white"))
    ax.text(9.4, 3.15, t("kept"), ha="center", fontsize=8)
    arrow(ax, (9.7, 2.78), (10.3, 2.78))
    ax.text(10.4, 2.78, t("draw one:\n\" Paris\""), va="center", fontsize=8, fontweight="bold")
    ax.text(10.4, 1.6, t("greedy (τ = 0):\nalways the top"), va="center", fontsize=7, color="#555555")
    ax.set_xlim(-0.1, 11.6)
    ax.set_ylim(0.0, 3.7)
    ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
