"""Chapter 8 diagram: the decoder-only stack of SmolLM2 with the tensor shape at every step.

Run from the repository root: python figures/ch08_stack.py
writes figures/generated/ch08_stack.svg
and, in Chinese, ch08_stack.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, mono, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch08_stack.svg")
ZH = {
    "token ids": "词元 id", "embedding lookup": "查嵌入表", "block  x 30": "块  × 30", "RMSNorm": "RMSNorm",
    "attention (GQA 9/3, RoPE)": "注意力（GQA 9/3，RoPE）", "FFN (SwiGLU, 1536)": "前馈网络（SwiGLU，1536）",
    "final RMSNorm": "最终 RMSNorm", "LM head (= embedding^T)": "语言模型头（= 嵌入表^T）",
    "next-token scores": "下一个词元的分数", "last row: (49152,)": "最后一行：(49152,)",
}
COLOURS = {"io": "#8c8c8c", "embed": "#937860", "norm": "#55a868", "attn": "#4c72b0", "ffn": "#dd8452",
           "head": "#8172b3"}


def box(ax, y, text, kind, x=0.0, w=2.4, h=0.5):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.03",
                                facecolor=COLOURS[kind], edgecolor="none"))
    ax.text(x, y, text, ha="center", va="center", color="white", fontsize=9, fontweight="bold")


def arrow(ax, y0, y1, x=0.0, colour="#555555"):
    ax.add_patch(FancyArrowPatch((x, y0), (x, y1), arrowstyle="-|>", mutation_scale=10, color=colour, lw=1.2,
                                 shrinkA=0, shrinkB=0))


def plus(ax, y):
    ax.add_patch(plt.Circle((0, y), 0.2, facecolor="#c44e52", edgecolor="none"))
    ax.text(0, y, "+", ha="center", va="center", color="white", fontsize=12, fontweight="bold")


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, ax = plt.subplots(figsize=(6.2, 8.2))
    steps = [(0.0, "token ids", "io", "(1, T)"), (1.0, "embedding lookup", "embed", "(1, T, 576)")]
    for y, text, kind, shape in steps:
        box(ax, y, t(text), kind)
        ax.text(1.6, y, t(shape) if shape in ZH else shape, va="center", fontsize=9, family=mono(language))
    arrow(ax, 0.25, 0.75)
    arrow(ax, 1.25, 1.85)
    # one block, drawn inside a frame
    ax.add_patch(FancyBboxPatch((-1.75, 1.9), 3.5, 4.3, boxstyle="round,pad=0.05", facecolor="#f4f4f4",
                                edgecolor="#999999", lw=1, ls="--"))
    ax.text(-1.65, 6.0, t("block  x 30"), fontsize=10, fontweight="bold", va="top")
    box(ax, 2.4, t("RMSNorm"), "norm", w=1.8, h=0.42)
    box(ax, 3.1, t("attention (GQA 9/3, RoPE)"), "attn", w=2.4, h=0.42)
    plus(ax, 3.75)
    box(ax, 4.4, t("RMSNorm"), "norm", w=1.8, h=0.42)
    box(ax, 5.1, t("FFN (SwiGLU, 1536)"), "ffn", w=2.4, h=0.42)
    plus(ax, 5.75)
    for y0, y1 in [(2.0, 2.19), (2.61, 2.89), (3.31, 3.55), (3.95, 4.19), (4.61, 4.89), (5.31, 5.55), (5.95, 6.6)]:
        arrow(ax, y0, y1)
    for y0, y1 in [(2.05, 3.75), (3.9, 5.75)]:  # residual paths
        ax.plot([0, -1.45, -1.45], [y0, y0, y1], color="#c44e52", lw=1.4)
        ax.add_patch(FancyArrowPatch((-1.45, y1), (-0.2, y1), arrowstyle="-|>", mutation_scale=10, color="#c44e52",
                                     lw=1.4, shrinkA=0, shrinkB=0))
    ax.text(1.6, 3.75, "(1, T, 576)", va="center", fontsize=9, family="monospace")
    ax.text(1.6, 5.75, "(1, T, 576)", va="center", fontsize=9, family="monospace")
    for y, text, kind, shape in [(6.85, "final RMSNorm", "norm", "(1, T, 576)"),
                                 (7.85, "LM head (= embedding^T)", "head", "(1, T, 49152)"),
                                 (8.85, "next-token scores", "io", "last row: (49152,)")]:
        box(ax, y, t(text), kind)
        ax.text(1.6, y, t(shape) if shape in ZH else shape, va="center", fontsize=9, family=mono(language))
    arrow(ax, 7.1, 7.6)
    arrow(ax, 8.1, 8.6)
    ax.set_xlim(-2.0, 3.6)
    ax.set_ylim(-0.5, 9.3)
    ax.invert_yaxis()
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
