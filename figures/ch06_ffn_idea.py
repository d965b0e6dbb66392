"""Chapter 6 diagram: the feed-forward network read as a memory of neurons. Each neuron compares the
token's vector with its key (a column of the first matrix, W_1 of shape (d, d_ff)); how strongly it fires decides how much of its
value (a row of the second matrix) it adds to the output.

Run from the repository root: python figures/ch06_ffn_idea.py
writes figures/generated/ch06_ffn_idea.svg
and, in Chinese, ch06_ffn_idea.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch06_ffn_idea.svg")
ZH = {
    "key {i}: x · k{i}": "键 {i}: x · k{i}", "+ h{i} × value {i}": "+ h{i} × 值 {i}",
    "Every token goes through the same d_ff neurons on its own (SmolLM2: 1,536 per block). "
    "A neuron that does not fire (h = 0) adds nothing.":
        "每个词元各自经过同一组 d_ff 个神经元（SmolLM2：每块 1,536 个）。没有激活的神经元（h = 0）什么也不加。",
}
TENSOR, KEY, VALUE = "#4c72b0", "#dd8452", "#55a868"
FIRING = [0.9, 0.0, 0.35, 0.0, 0.6]          # illustrative activations of five neurons


def box(ax, x, y, text, colour, w=1.5, h=0.55, alpha=1.0):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.03",
                                facecolor=colour, edgecolor="none", alpha=alpha))
    ax.text(x, y, text, ha="center", va="center", color="white", fontsize=9, fontweight="bold")


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, ax = plt.subplots(figsize=(9.5, 3.6))
    box(ax, 0.8, 1.5, "x\n(d)", TENSOR, w=1.0, h=0.8)
    ys = [2.9, 2.2, 1.5, 0.8, 0.1]
    for i, (y, h) in enumerate(zip(ys, FIRING)):
        ax.annotate("", xy=(2.35, y), xytext=(1.35, 1.5), arrowprops=dict(arrowstyle="-|>", color="#777777", lw=0.8))
        box(ax, 3.1, y, t("key {i}: x · k{i}").format(i=i), KEY, w=1.5)
        ax.text(4.3, y, f"h{i} = {h:.2f}", va="center", fontsize=9, color="#333333")
        alpha = 0.25 + 0.75 * h
        ax.annotate("", xy=(6.15, y), xytext=(5.2, y),
                    arrowprops=dict(arrowstyle="-|>", color=VALUE, lw=0.5 + 4 * h, alpha=alpha))
        box(ax, 6.9, y, t("+ h{i} × value {i}").format(i=i), VALUE, w=1.5, alpha=alpha)
        ax.annotate("", xy=(8.55, 1.5), xytext=(7.65, y), arrowprops=dict(arrowstyle="-|>", color="#777777", lw=0.8))
    box(ax, 9.1, 1.5, "FFN(x)\n(d)", TENSOR, w=1.0, h=0.8)
    ax.text(0.2, -0.6, t("Every token goes through the same d_ff neurons on its own (SmolLM2: 1,536 per block). "
                          "A neuron that does not fire (h = 0) adds nothing."), fontsize=8.5, color="#444444")
    ax.set_xlim(0.0, 9.9)
    ax.set_ylim(-0.8, 3.4)
    ax.axis("off")
    fig.tight_layout()
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
