"""Chapter 15 diagram: the logit lens reads the residual stream after every block through the
model's own final norm and LM head, as if that block were the last.

Run from the repository root: python figures/ch15_logit_lens.py
writes figures/generated/ch15_logit_lens.svg
and, in Chinese, ch15_logit_lens.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch15_logit_lens.svg")
ZH = {
    "embed": "嵌入", "block 0": "第 0 块", "block 11": "第 11 块", "block 12": "第 12 块", "block 13": "第 13 块",
    "block 17": "第 17 块", "' of'": "' of'", "junk": "无意义词元", "' cities'": "' cities'", "' Eiffel'": "' Eiffel'",
    "' Paris'": "' Paris'", "final norm → LM head": "最终归一化 → 语言模型头",
    "The Eiffel Tower is in the city of": "提示：“The Eiffel Tower is in the city of”",
    "residual stream\nafter each block": "每块之后的\n残差流",
    "the model's own readout,\nused after every block": "模型自身的读出层，\n每一块之后都用它",
    "top token\n(last position)": "概率最高的词元\n（最后一个位置）", "= the model's\n   own output": "= 模型实际\n   的输出",
}
BLOCK, READ, TOKEN = "#c6dbf7", "#f7c6d0", "#eeeeee"


def box(ax, x, y, w, h, text, colour, size=9.5, bold=False):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                facecolor=colour, edgecolor="#555555", linewidth=1.0))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
            fontweight="bold" if bold else "normal")


def arrow(ax, x0, y0, x1, y1, colour="#333333", style="->"):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle=style, color=colour, lw=1.3))


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(9, 5.2))
    rows = [("embed", "' of'"), ("block 0", "' of'"), ("...", "junk"), ("block 11", "' cities'"),
            ("block 12", "' Eiffel'"), ("block 13", "' Paris'"), ("...", "' Paris'"), ("block 17", "' Paris'")]
    for k, (name, top) in enumerate(rows):
        y = 0.3 + k * 0.6
        if name == "...":
            ax.text(1.0, y + 0.2, "⋮", ha="center", va="center", fontsize=14)
            ax.text(6.9, y + 0.2, "⋮", ha="center", va="center", fontsize=14)
            continue
        box(ax, 0.3, y, 1.4, 0.42, t(name), BLOCK if name != "embed" else TOKEN)
        arrow(ax, 1.75, y + 0.21, 3.0, y + 0.21, colour="#c44e52")
        box(ax, 3.0, y, 2.6, 0.42, t("final norm → LM head"), READ, size=8.5)
        arrow(ax, 5.65, y + 0.21, 6.2, y + 0.21)
        box(ax, 6.2, y, 1.4, 0.42, t(top), TOKEN, size=9, bold=top == "' Paris'")
    arrow(ax, 1.0, 0.05, 1.0, 0.3, colour="#777777")
    ax.text(1.0, -0.05, t("The Eiffel Tower is in the city of"), ha="center", va="top", fontsize=8.5)
    ax.text(2.35, 5.15, t("residual stream\nafter each block"), ha="center", va="bottom", fontsize=8.5, color="#c44e52")
    ax.text(4.3, 5.15, t("the model's own readout,\nused after every block"), ha="center", va="bottom", fontsize=8.5)
    ax.text(6.9, 5.15, t("top token\n(last position)"), ha="center", va="bottom", fontsize=8.5)
    ax.text(7.9, 0.3 + 7 * 0.6 + 0.21, t("= the model's\n   own output"), fontsize=8, va="center", color="#555555")
    ax.set_xlim(0, 9)
    ax.set_ylim(-0.4, 5.8)
    ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
