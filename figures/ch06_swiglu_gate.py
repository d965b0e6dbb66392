"""Chapter 6 diagram: the gated feed-forward network (SwiGLU), with the shape of every tensor.

Run from the repository root: python figures/ch06_swiglu_gate.py
writes figures/generated/ch06_swiglu_gate.svg
and, in Chinese, ch06_swiglu_gate.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch06_swiglu_gate.svg")
ZH = {
    "SiLU\n(GELU: GeGLU)": "SiLU\n(GELU 则为 GeGLU)", "the gate: how open, per neuron": "门：每个神经元开多大",
    "linear: how much, and its sign": "线性：乘上多少，正负皆可",
    "row i of W_down: neuron i's value": "W_down 的第 i 行：神经元 i 的值",
    "SmolLM2: d = 576, d_ff = 1536.  Three matrices instead of two, so d_ff is about 8/3 d "
    "instead of 4 d for the same parameter count.":
        "SmolLM2：d = 576，d_ff = 1536。  用三个矩阵代替两个，所以参数量相同时 d_ff 约为 8/3 d，而不是 4 d。",
}
TENSOR, OP, GATE = "#4c72b0", "#dd8452", "#55a868"


def box(ax, x, y, text, colour, w=1.7, h=0.6):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.03",
                                facecolor=colour, edgecolor="none"))
    ax.text(x, y, text, ha="center", va="center", color="white", fontsize=9, fontweight="bold")


def arrow(ax, x0, y0, x1, y1):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="-|>", color="#555555", lw=1.2))


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, ax = plt.subplots(figsize=(9.5, 2.9))
    box(ax, 0.9, 1.0, "x\n(T, d)", TENSOR, w=1.2)
    arrow(ax, 1.55, 1.1, 2.35, 1.8)
    arrow(ax, 1.55, 0.9, 2.35, 0.2)
    box(ax, 3.2, 1.8, "x W_gate\n(T, d_ff)", OP)
    box(ax, 3.2, 0.2, "x W_up\n(T, d_ff)", OP)
    arrow(ax, 4.1, 1.8, 4.75, 1.8)
    box(ax, 5.5, 1.8, t("SiLU\n(GELU: GeGLU)"), GATE, w=1.4)
    ax.text(5.5, 2.3, t("the gate: how open, per neuron"), ha="center", fontsize=8.5, color="#333333")
    ax.text(3.2, -0.3, t("linear: how much, and its sign"), ha="center", fontsize=8.5, color="#333333")
    arrow(ax, 6.25, 1.65, 6.95, 1.1)
    arrow(ax, 4.1, 0.2, 6.95, 0.9)
    ax.add_patch(plt.Circle((7.25, 1.0), 0.3, color=GATE))
    ax.text(7.25, 1.0, "⊙", ha="center", va="center", color="white", fontsize=16)
    ax.text(7.25, 0.45, "h (T, d_ff)", ha="center", fontsize=8.5)
    arrow(ax, 7.6, 1.0, 8.25, 1.0)
    box(ax, 9.1, 1.0, "h W_down\n(T, d)", OP)
    ax.text(9.1, 0.45, t("row i of W_down: neuron i's value"), ha="center", fontsize=8.5, color="#333333")
    ax.text(0.2, -0.75, t("SmolLM2: d = 576, d_ff = 1536.  Three matrices instead of two, so d_ff is about 8/3 d "
                           "instead of 4 d for the same parameter count."), fontsize=8.5, color="#444444")
    ax.set_xlim(0.0, 10.2)
    ax.set_ylim(-0.95, 2.6)
    ax.axis("off")
    fig.tight_layout()
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
