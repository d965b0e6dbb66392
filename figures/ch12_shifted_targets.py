"""Chapter 12 diagram: one sequence of T tokens gives T-1 training examples in one forward pass;
the targets are the inputs shifted left by one, and the loss is the mean surprise at the right token.

Run from the repository root: python figures/ch12_shifted_targets.py
writes figures/generated/ch12_shifted_targets.svg
and, in Chinese, ch12_shifted_targets.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch12_shifted_targets.svg")
ZH = {
    "the model, one forward pass\n(causal mask: position t sees tokens 0..t only)": "模型，一次前向传播\n（因果掩码：位置 t 只看到词元 0..t）",
    "inputs  ids[:, :-1]": "输入  ids[:, :-1]", "targets ids[:, 1:]": "目标  ids[:, 1:]",
    "loss = mean of\n−log p(target)": "损失 = −log p(目标)\n的平均值",
    "6 tokens → 5 examples, all at once (teacher forcing)": "6 个词元 → 5 个训练样本，一次算完（教师强制）",
}
TOKEN, MODEL, LOSS = "#eeeeee", "#c6dbf7", "#f7c6d0"


def box(ax, x, y, w, h, text, colour, size=9.5):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                facecolor=colour, edgecolor="#555555", linewidth=1.0))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size)


def arrow(ax, x0, y0, x1, y1, colour="#333333"):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="->", color=colour, lw=1.2))


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(9, 4))
    words = ["The", "cat", "sat", "on", "the", "mat"]
    for k, w in enumerate(words[:-1]):
        x = 0.4 + k * 1.5
        box(ax, x, 0.2, 1.1, 0.45, w, TOKEN)
        arrow(ax, x + 0.55, 0.65, x + 0.55, 1.1)
        box(ax, x, 2.2, 1.1, 0.45, f"p(· | ≤ {w})", LOSS, size=8)
        arrow(ax, x + 0.55, 1.8, x + 0.55, 2.2)
        box(ax, x, 3.1, 1.1, 0.45, words[k + 1], TOKEN)
        arrow(ax, x + 0.55, 3.1, x + 0.55, 2.68, colour="#c44e52")
    box(ax, 0.4, 1.1, 7.1, 0.7, t("the model, one forward pass\n(causal mask: position t sees tokens 0..t only)"), MODEL)
    ax.text(8.0, 0.42, t("inputs  ids[:, :-1]"), fontsize=8.5, va="center")
    ax.text(8.0, 3.32, t("targets ids[:, 1:]"), fontsize=8.5, va="center", color="#c44e52")
    ax.text(8.0, 2.42, t("loss = mean of\n−log p(target)"), fontsize=8.5, va="center")
    ax.text(4.0, 3.95, t("6 tokens → 5 examples, all at once (teacher forcing)"), ha="center", fontsize=10)
    ax.set_xlim(0, 9.8)
    ax.set_ylim(0, 4.2)
    ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
