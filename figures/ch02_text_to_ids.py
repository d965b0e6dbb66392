"""Chapter 2 diagram: text -> bytes -> pieces learned by BPE -> one id per piece. Run from the repository
root; writes figures/generated/ch02_text_to_ids.svg
and, in Chinese, ch02_text_to_ids.zh_CN.svg."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch02_text_to_ids.svg")
ZH = {
    "text": "文本", "any string, any language": "任意字符串，任意语言",
    "UTF-8 bytes": "UTF-8 字节", "256 possible values: nothing is ever unknown": "只有 256 种取值：永远不会遇到未知字符",
    "BPE pieces": "BPE 片段", "frequent byte runs merged into one token": "高频的字节串合并成一个词元",
    "token ids": "词元 id", "one integer per piece (made-up numbers)": "每个片段一个整数（数字是虚构的）",
}
TEXT = "the lowest tower"
PIECES = ["the", " lowest", " tower"]          # what merges learned from a corpus full of these words give
COLOURS = ["#fde2a7", "#b9e3c6", "#c6dbf7"]


def boxes(ax, y, items, colours, widths, label, note, show_spaces=True):
    x = 0.0
    for item, colour, w in zip(items, colours, widths):
        ax.add_patch(FancyBboxPatch((x, y), w - 0.08, 0.6, boxstyle="round,pad=0.02,rounding_size=0.08",
                                    facecolor=colour, edgecolor="#555555", linewidth=1))
        ax.text(x + (w - 0.08) / 2, y + 0.3, item.replace(" ", "␣") if show_spaces else item, ha="center", va="center", fontsize=10,
                family="monospace")
        x += w
    ax.text(-0.3, y + 0.3, label, ha="right", va="center", fontsize=10, fontweight="bold")
    ax.text(x + 0.2, y + 0.3, note, ha="left", va="center", fontsize=9, color="#555555")


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"  # keep text as text in the SVG
    fig, ax = plt.subplots(figsize=(11, 3.2))
    unit = 0.55                                  # width of one byte
    piece_of_byte = [k for k, p in enumerate(PIECES) for _ in p]
    boxes(ax, 3.0, [TEXT], ["#eeeeee"], [unit * len(TEXT)], t("text"), t("any string, any language"))
    boxes(ax, 2.0, list(TEXT), [COLOURS[k] for k in piece_of_byte], [unit] * len(TEXT), t("UTF-8 bytes"),
          t("256 possible values: nothing is ever unknown"))
    boxes(ax, 1.0, PIECES, COLOURS, [unit * len(p) for p in PIECES], t("BPE pieces"),
          t("frequent byte runs merged into one token"))
    boxes(ax, 0.0, ["id 1820", "id 3103", "id 4730"], COLOURS, [unit * len(p) for p in PIECES], t("token ids"),
          t("one integer per piece (made-up numbers)"), show_spaces=False)
    for y in [2.95, 1.95, 0.95]:
        ax.annotate("", xy=(unit * len(TEXT) / 2, y - 0.3), xytext=(unit * len(TEXT) / 2, y),
                    arrowprops=dict(arrowstyle="->", color="#333333", lw=1.2))
    ax.set_xlim(-2.4, unit * len(TEXT) + 5.5)
    ax.set_ylim(-0.2, 3.8)
    ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
