"""Chapter 5 diagram: multi-head attention splits Q, K, V into heads and concatenates the results.

Run from the repository root: python figures/ch05_multihead_split.py
writes figures/generated/ch05_multihead_split.svg
and, in Chinese, ch05_multihead_split.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch05_multihead_split.svg")
ZH = {
    "view +\ntranspose": "view +\ntranspose", "head {h}": "头 {h}",
    # one line in Chinese: two lines of CJK run into the note below
    "(H, T, d_k): one slice\nof width d_k per head": "(H, T, d_k)：每个头一片宽 d_k 的切片",
    "concatenated   (T, H·d_k)": "拼接   (T, H·d_k)", "output (T, d)\nW_O mixes the heads": "输出 (T, d)\nW_O 混合各个头",
    "K and V are split the same way.  H·d_k need not equal d: SmolLM2 9 × 64 = 576 = d, "
    "Gemma-3-270M 4 × 256 = 1024 ≠ d = 640.":
        "K 和 V 按同样的方式切分。  H·d_k 不必等于 d：SmolLM2 9 × 64 = 576 = d，"
        "Gemma-3-270M 4 × 256 = 1024 ≠ d = 640。",
}
HEADS = ["#4c72b0", "#55a868", "#c44e52"]


def strip(ax, x, y, w, h, colours, label, vertical_gap=0.0):
    n = len(colours)
    for i, c in enumerate(colours):
        ax.add_patch(Rectangle((x + i * w / n, y), w / n - vertical_gap, h, facecolor=c, edgecolor="white", lw=1.5))
    ax.text(x + w / 2, y - 0.18, label, ha="center", va="top", fontsize=8.5)


def arrow(ax, x0, y0, x1, y1, text=""):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="-|>", color="#555555", lw=1.1))
    if text:
        ax.text((x0 + x1) / 2, max(y0, y1) + 0.1, text, ha="center", va="bottom", fontsize=8)


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, ax = plt.subplots(figsize=(10, 2.9))
    strip(ax, 0.0, 1.0, 2.0, 1.0, HEADS, "Q = x W_Q   (T, H·d_k)")
    arrow(ax, 2.1, 1.5, 2.95, 1.5)
    ax.text(2.52, 1.25, t("view +\ntranspose"), ha="center", va="top", fontsize=8)
    for h, c in enumerate(HEADS):
        y = 2.2 - h * 0.85
        strip(ax, 3.1, y, 0.67, 0.6, [c], "")
        ax.text(3.1 + 0.33, y + 0.3, t("head {h}").format(h=h), ha="center", va="center",
                color="white", fontsize=8, fontweight="bold")
        arrow(ax, 3.85, y + 0.3, 4.7, y + 0.3)
        ax.add_patch(Rectangle((4.8, y), 1.9, 0.6, facecolor="#f0f0f0", edgecolor=c, lw=1.5))
        ax.text(5.75, y + 0.3, "softmax(q kᵀ/√d_k) v", ha="center", va="center", fontsize=8)
        arrow(ax, 6.8, y + 0.3, 7.6, 1.5)
    ax.text(3.45, 0.0, t("(H, T, d_k): one slice\nof width d_k per head"), ha="center", va="top", fontsize=8.5)
    strip(ax, 7.7, 1.0, 2.0, 1.0, HEADS, t("concatenated   (T, H·d_k)"))
    arrow(ax, 9.8, 1.5, 10.5, 1.5, "· W_O")
    ax.add_patch(Rectangle((10.6, 1.0), 1.3, 1.0, facecolor="#8c8c8c", edgecolor="white"))
    ax.text(11.25, 0.82, t("output (T, d)\nW_O mixes the heads"), ha="center", va="top", fontsize=8.5)
    ax.text(0.0, -0.55, t("K and V are split the same way.  H·d_k need not equal d: SmolLM2 9 × 64 = 576 = d, "
                           "Gemma-3-270M 4 × 256 = 1024 ≠ d = 640."), fontsize=8.5, color="#444444")
    ax.set_xlim(-0.1, 12.0)
    ax.set_ylim(-0.7, 2.95)
    ax.axis("off")
    fig.tight_layout()
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
