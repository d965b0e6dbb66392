"""Chapter 4 diagram: attention alone sees "dog bites man" and "man bites dog" as the same bag of tokens;
RoPE turns each token's query and key by an angle proportional to its position, so the two orders differ.
Run from the repository root;
writes figures/generated/ch04_order.svg and, in Chinese, ch04_order.zh_CN.svg."""
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch04_order.svg")
ZH = {
    "dog bites man": "“dog bites man”", "man bites dog": "“man bites dog”", "position {pos}": "位置 {pos}",
    "attention without positions:\nthe same bag of tokens, same outputs (permuted)":
        "没有位置信息的注意力：\n同一袋词元，输出也相同（只是换了顺序）",
    "with RoPE: each query and key turned by\nan angle that grows with its position":
        "使用 RoPE：每个查询和键都转过\n一个随位置增大的角度",
}
COLOURS = {"dog": "#fde2a7", "bites": "#b9e3c6", "man": "#c6dbf7"}
BASE = {"dog": 20, "bites": 75, "man": 140}    # each token's own direction (degrees), the same in both rows
TURN = 50                                       # degrees added per position


def token(ax, x, y, word, angle=None):
    ax.add_patch(FancyBboxPatch((x, y), 1.3, 0.7, boxstyle="round,pad=0.02,rounding_size=0.1",
                                facecolor=COLOURS[word], edgecolor="#555555", linewidth=1))
    ax.text(x + 0.65, y + 0.35, word, ha="center", va="center", fontsize=10)
    if angle is not None:                       # a small clock hand under the token
        cx, cy, r = x + 0.65, y - 0.55, 0.38
        ax.add_patch(plt.Circle((cx, cy), r, fill=False, color="#999999", lw=0.8))
        a = math.radians(angle)
        ax.annotate("", xy=(cx + r * math.cos(a), cy + r * math.sin(a)), xytext=(cx, cy),
                    arrowprops=dict(arrowstyle="->", color="#1f4e99", lw=1.4))


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"  # keep text as text in the SVG
    fig, ax = plt.subplots(figsize=(11, 3.6))
    for row, sentence in enumerate([["dog", "bites", "man"], ["man", "bites", "dog"]]):
        y = 2.2 - row * 2.2
        ax.text(-0.3, y + 0.35, t(" ".join(sentence)), ha="right", va="center", fontsize=10, fontweight="bold")
        for pos, word in enumerate(sentence):          # left: no positions, a bag of tokens
            token(ax, pos * 1.5, y, word)
        for pos, word in enumerate(sentence):          # right: RoPE turns each vector by pos * TURN
            token(ax, 6.2 + pos * 1.5, y, word, BASE[word] + pos * TURN)
            ax.text(6.2 + pos * 1.5 + 0.65, y + 0.85, t("position {pos}").format(pos=pos), ha="center", fontsize=8, color="#555555")
    ax.text(2.15, 3.45, t("attention without positions:\nthe same bag of tokens, same outputs (permuted)"),
            ha="center", va="bottom", fontsize=9.5)
    ax.text(8.35, 3.45, t("with RoPE: each query and key turned by\nan angle that grows with its position"),
            ha="center", va="bottom", fontsize=9.5)
    ax.plot([5.4, 5.4], [-1.0, 3.4], color="#cccccc", lw=1)
    ax.set_xlim(-2.6, 11)
    ax.set_ylim(-1.1, 4.3)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
