"""Chapter 5 diagram: one attention layer step by step, with the shape of every tensor.

Run from the repository root: python figures/ch05_attention_pipeline.py
writes figures/generated/ch05_attention_pipeline.svg
and, in Chinese, ch05_attention_pipeline.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch05_attention_pipeline.svg")
ZH = {
    "scores\nQ Kᵀ  (T, T)": "分数\nQ Kᵀ  (T, T)", "scale\n÷ √d_k": "缩放\n÷ √d_k", "mask\n−∞ where j > i": "掩码\nj > i 处为 −∞",
    "softmax per row\nA  (T, T)": "逐行 softmax\nA  (T, T)", "weighted sum\nA V  (T, d_v)": "加权求和\nA V  (T, d_v)",
    "output\n(T, d)": "输出\n(T, d)",
    "blue: tensors   orange: operations   one head shown; each row of A sums to 1, masked entries are exactly 0":
        "蓝色：张量   橙色：运算   图中只画一个头；A 的每一行之和为 1，被掩码的元素恰好为 0",
}
TENSOR, OP = "#4c72b0", "#dd8452"


def box(ax, x, y, text, colour, w=1.5, h=0.55):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.03",
                                facecolor=colour, edgecolor="none"))
    ax.text(x, y, text, ha="center", va="center", color="white", fontsize=9, fontweight="bold")


def arrow(ax, x0, y0, x1, y1, label=""):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="-|>", color="#555555", lw=1.2))
    if label:
        ax.text((x0 + x1) / 2, (y0 + y1) / 2 + 0.12, label, ha="center", va="bottom", fontsize=8, color="#333333")


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, ax = plt.subplots(figsize=(10, 3.1))
    # row 1: x -> Q, K, V
    box(ax, 0.8, 1.6, "x\n(T, d)", TENSOR, w=1.2)
    for y, name, shape in [(2.6, "Q = x W_Q", "(T, d_k)"), (1.6, "K = x W_K", "(T, d_k)"), (0.6, "V = x W_V", "(T, d_v)")]:
        arrow(ax, 1.45, 1.6, 2.35, y)
        box(ax, 3.1, y, f"{name}\n{shape}", TENSOR)
    # scores
    arrow(ax, 3.85, 2.6, 4.75, 2.05)
    arrow(ax, 3.85, 1.6, 4.75, 1.95)
    box(ax, 5.5, 2.0, t("scores\nQ Kᵀ  (T, T)"), OP)
    arrow(ax, 6.25, 2.0, 6.75, 2.0)
    box(ax, 7.5, 2.0, t("scale\n÷ √d_k"), OP)
    arrow(ax, 8.25, 2.0, 8.75, 2.0)
    box(ax, 9.5, 2.0, t("mask\n−∞ where j > i"), OP)
    arrow(ax, 9.5, 1.72, 9.5, 1.18)
    box(ax, 9.5, 0.9, t("softmax per row\nA  (T, T)"), OP)
    arrow(ax, 8.75, 0.9, 8.25, 0.9)
    box(ax, 7.5, 0.9, t("weighted sum\nA V  (T, d_v)"), OP)
    arrow(ax, 3.85, 0.6, 6.75, 0.75)
    arrow(ax, 7.5, 0.62, 7.5, 0.08)
    box(ax, 7.5, -0.2, "· W_O\n(T, d)", OP)
    arrow(ax, 8.25, -0.2, 9.0, -0.2)
    box(ax, 9.75, -0.2, t("output\n(T, d)"), TENSOR, w=1.3)
    ax.text(0.1, -0.85, t("blue: tensors   orange: operations   one head shown; "
                           "each row of A sums to 1, masked entries are exactly 0"),
            fontsize=8.5, color="#444444")
    ax.set_xlim(-0.1, 10.6)
    ax.set_ylim(-1.0, 3.0)
    ax.axis("off")
    fig.tight_layout()
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
