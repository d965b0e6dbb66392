"""Chapter 7 diagram: the residual stream of a pre-norm model as a running sum.

Run from the repository root: python figures/ch07_residual_sum.py
writes figures/generated/ch07_residual_sum.svg
and, in Chinese, ch07_residual_sum.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch07_residual_sum.svg")
ZH = {
    "embed-\nding e": "嵌入\ne", "norm\n→ attn {label}": "归一化\n→ 注意力 {label}",
    "norm\n→ FFN {label}": "归一化\n→ 前馈 {label}", "final\nnorm": "最终\n归一化",
    "Each sublayer reads a normalised copy of the stream and ADDS its output; nothing is overwritten.\n"
    "After block 29:  x = e + a0 + m0 + a1 + m1 + … + a29 + m29.":
        "每个子层读取残差流的一份归一化副本，再把自己的输出加到流上：什么都不会被覆盖。\n"
        "第 29 块之后：  x = e + a0 + m0 + a1 + m1 + … + a29 + m29。",
}
STREAM, ATTN, FFN, NORM = "#4c72b0", "#dd8452", "#55a868", "#8172b2"


def box(ax, x, y, text, colour, w=1.0, h=0.5):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.03", facecolor=colour,
                                edgecolor="none"))
    ax.text(x, y, text, ha="center", va="center", color="white", fontsize=8.5, fontweight="bold")


def plus(ax, x, y):
    ax.add_patch(plt.Circle((x, y), 0.16, facecolor="white", edgecolor=STREAM, lw=1.5, zorder=3))
    ax.text(x, y, "+", ha="center", va="center", fontsize=11, color=STREAM, zorder=4)


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, ax = plt.subplots(figsize=(10.5, 3.0))
    y = 0.0
    box(ax, 0.2, y, t("embed-\nding e"), STREAM, w=1.1, h=0.6)
    ax.plot([0.85, 11.1], [y, y], color=STREAM, lw=3, zorder=1)
    x = 1.6
    for l, label in [(0, "0"), (1, "1"), (None, "…"), (29, "29")]:
        if l is None:
            ax.text(x + 0.6, y + 0.25, "…", fontsize=16, ha="center")
            x += 1.2
            continue
        for kind, colour, name in [("attn", ATTN, f"a{label}"), ("mlp", FFN, f"m{label}")]:
            text = t("norm\n→ attn {label}" if kind == "attn" else "norm\n→ FFN {label}").format(label=label)
            box(ax, x + 0.45, 1.25, text, colour, w=1.05, h=0.6)
            ax.annotate("", xy=(x + 0.2, 0.93), xytext=(x + 0.2, 0.05),
                        arrowprops=dict(arrowstyle="-|>", color="#777777", lw=1))
            ax.annotate("", xy=(x + 0.7, 0.18), xytext=(x + 0.7, 0.93),
                        arrowprops=dict(arrowstyle="-|>", color=colour, lw=1.5))
            ax.text(x + 0.85, 0.5, name, fontsize=8.5, color=colour)
            plus(ax, x + 0.7, y)
            x += 1.25
        x += 0.1
    box(ax, 11.75, y, t("final\nnorm"), NORM, w=1.1, h=0.6)
    ax.text(-0.3, -0.65, t("Each sublayer reads a normalised copy of the stream and ADDS its output; nothing is overwritten.\n"
                            "After block 29:  x = e + a0 + m0 + a1 + m1 + … + a29 + m29."),
            fontsize=9, color="#333333")
    ax.set_xlim(-0.45, 12.4)
    ax.set_ylim(-1.15, 1.7)
    ax.axis("off")
    fig.tight_layout()
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
