"""Chapter 7 diagram: where the norms sit in a block -- post-norm (2017), pre-norm (GPT-2, Llama),
sandwich (Gemma 2/3). Shown for the attention half of a block; the FFN half repeats the pattern.

Run from the repository root: python figures/ch07_norm_placement.py
writes figures/generated/ch07_norm_placement.svg
and, in Chinese, ch07_norm_placement.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch07_norm_placement.svg")
ZH = {
    "residual": "残差", "attention": "注意力", "norm": "归一化",
    "Post-norm (2017)": "后置归一化（2017）", "Pre-norm (GPT-2, Llama)": "前置归一化（GPT-2、Llama）",
    "Sandwich (Gemma 2/3)": "三明治归一化（Gemma 2/3）",
}
COLOURS = {"norm": "#55a868", "sub": "#4c72b0", "add": "#c44e52"}


def box(ax, x, y, text, kind, w=1.3):
    if kind == "add":
        ax.add_patch(plt.Circle((x, y), 0.22, facecolor=COLOURS["add"], edgecolor="none"))
        ax.text(x, y, "+", ha="center", va="center", color="white", fontsize=14, fontweight="bold")
        return
    ax.add_patch(FancyBboxPatch((x - w / 2, y - 0.25), w, 0.5, boxstyle="round,pad=0.03",
                                facecolor=COLOURS[kind], edgecolor="none"))
    ax.text(x, y, text, ha="center", va="center", color="white", fontsize=9, fontweight="bold")


def arrow(ax, start, end, color="#555555"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color=color,
                                 lw=1.2, shrinkA=0, shrinkB=0))


def column(ax, title, steps, skip_from, skip_to, caption, t):
    """steps: list of (y, label, kind) from bottom to top, drawn at x = 0; the residual skip
    goes from y=skip_from on the main line, around the right side, into the '+' at y=skip_to."""
    ax.text(0, -0.9, "x", ha="center", va="center", fontsize=11, style="italic")
    prev = -0.7
    for y, label, kind in steps:
        top = y - (0.22 if kind == "add" else 0.25)
        arrow(ax, (0, prev), (0, top))
        box(ax, 0, y, t(label) if label else label, kind)
        prev = y + (0.22 if kind == "add" else 0.25)
    arrow(ax, (0, prev), (0, prev + 0.45))
    # residual path
    ax.plot([0, 1.15, 1.15], [skip_from, skip_from, skip_to], color=COLOURS["add"], lw=1.5)
    arrow(ax, (1.15, skip_to), (0.22, skip_to), color=COLOURS["add"])
    ax.text(1.25, (skip_from + skip_to) / 2, t("residual"), rotation=90, va="center", fontsize=8,
            color=COLOURS["add"])
    ax.set_title(t(title), fontsize=11)
    ax.text(0.3, -1.45, caption, ha="center", va="center", fontsize=8, color="#444444")
    ax.set_xlim(-1.4, 2.0)
    ax.set_ylim(-1.7, 5.2)
    ax.axis("off")


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, axes = plt.subplots(1, 3, figsize=(10, 4.6))
    column(axes[0], "Post-norm (2017)",
           [(0.6, "attention", "sub"), (1.7, "", "add"), (2.8, "norm", "norm")],
           -0.35, 1.7, "x = norm(x + attn(x))", t)
    column(axes[1], "Pre-norm (GPT-2, Llama)",
           [(0.6, "norm", "norm"), (1.7, "attention", "sub"), (2.8, "", "add")],
           -0.35, 2.8, "x = x + attn(norm(x))", t)
    column(axes[2], "Sandwich (Gemma 2/3)",
           [(0.6, "norm", "norm"), (1.7, "attention", "sub"), (2.8, "norm", "norm"), (3.9, "", "add")],
           -0.35, 3.9, "x = x + norm(attn(norm(x)))", t)
    fig.tight_layout()
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
