"""Chapter 16 diagram: steering adds s * v to the residual stream after one block, at every position;
a Patchscope copies one hidden state of a source prompt into a template and lets the model describe it.

Run from the repository root: python figures/ch16_steer_and_patch.py
writes figures/generated/ch16_steer_and_patch.svg
and, in Chinese, ch16_steer_and_patch.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch16_steer_and_patch.svg")
ZH = {
    "steering: add a direction": "激活引导：加上一个方向",
    "Yesterday my friend and I went to": "“Yesterday my friend and I went to”",
    "blocks 0-11": "第 0-11 块", "block 12": "第 12 块", "blocks 13-29": "第 13-29 块",
    "v = mean(sea prompts)\n   − mean(city prompts)": "v = mean(大海类提示)\n   − mean(城市类提示)",
    "Patchscope: let the model describe a state": "Patchscope：让模型描述一个隐藏状态",
    "block ℓ": "第 ℓ 块", "block ℓ'": "第 ℓ' 块", "later blocks": "后面的块",
    "copy the last token's state\ninto the place of x": "把最后一个词元的状态\n复制到 x 的位置",
    "Syria: a country ... x:": "“Syria: a country ... x:”",
}
BLOCK, PUSH, TOKEN = "#c6dbf7", "#b9e3c6", "#eeeeee"


def box(ax, x, y, w, h, text, colour, size=9):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                facecolor=colour, edgecolor="#555555", linewidth=1.0))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size)


def arrow(ax, x0, y0, x1, y1, colour="#333333"):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="->", color=colour, lw=1.3))


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4))

    left.set_title(t("steering: add a direction"), fontsize=11)
    box(left, 0.2, 0.2, 3.6, 0.5, t("Yesterday my friend and I went to"), TOKEN)
    for k, name in enumerate(["blocks 0-11", "block 12", "blocks 13-29"]):
        box(left, 0.9, 1.0 + k * 0.9, 2.2, 0.5, t(name), BLOCK)
        arrow(left, 2.0, 0.7 + k * 0.9, 2.0, 1.0 + k * 0.9)
    box(left, 0.9, 3.7, 2.2, 0.45, "' the sea.'", TOKEN)
    arrow(left, 2.0, 3.4, 2.0, 3.7)
    box(left, 3.6, 1.95, 1.5, 0.5, "+ s · v", PUSH, size=10)
    arrow(left, 3.6, 2.2, 3.15, 2.2, colour="#55a868")
    left.text(4.35, 1.6, t("v = mean(sea prompts)\n   − mean(city prompts)"), fontsize=8, ha="center", va="top")
    left.set_xlim(0, 5.4)
    left.set_ylim(0, 4.4)
    left.axis("off")

    right.set_title(t("Patchscope: let the model describe a state"), fontsize=11)
    box(right, -0.25, 0.2, 2.9, 0.5, "<|endoftext|> Albert Einstein", TOKEN, size=7.5)
    box(right, 0.4, 1.1, 1.6, 0.5, t("block ℓ"), BLOCK)
    arrow(right, 1.2, 0.7, 1.2, 1.1)
    box(right, 3.0, 0.2, 2.5, 0.5, t("Syria: a country ... x:"), TOKEN, size=7.5)
    box(right, 3.45, 1.1, 1.6, 0.5, t("block ℓ'"), BLOCK)
    arrow(right, 4.25, 0.7, 4.25, 1.1)
    arrow(right, 2.0, 1.45, 3.45, 1.45, colour="#c44e52")
    right.text(2.72, 1.62, t("copy the last token's state\ninto the place of x"), fontsize=8, ha="center",
               va="bottom", color="#c44e52")
    box(right, 3.45, 2.2, 1.6, 0.5, t("later blocks"), BLOCK)
    arrow(right, 4.25, 1.6, 4.25, 2.2)
    box(right, 2.85, 3.2, 2.8, 0.5, "' a German physicist.'", TOKEN, size=8.5)   # the lesson's run, layer 8
    arrow(right, 4.25, 2.7, 4.25, 3.2)
    right.set_xlim(-0.4, 6)
    right.set_ylim(0, 4.4)
    right.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
