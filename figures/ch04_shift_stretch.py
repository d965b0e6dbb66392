"""Chapter 4 diagram: the two position experiments on SmolLM2. Shifting adds the same offset to every
position id (distances unchanged); stretching multiplies them (distances grow). Run from the repository
root; writes figures/generated/ch04_shift_stretch.svg
and, in Chinese, ch04_shift_stretch.zh_CN.svg."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch04_shift_stretch.svg")
ZH = {
    "as trained": "训练时的位置", "shifted by {shift:,}": "平移 {shift:,}", "stretched ×{stretch}": "拉伸 ×{stretch}",
    "distance between neighbours: 1": "相邻位置的距离：1", "positions never seen, distances as usual": "位置从未见过，距离照旧",
    "distances {stretch} times larger": "距离放大 {stretch} 倍", "pos {pos}": "位置 {pos}",
}
TOKENS = ["The", " old", " lighthouse", " stood", " at"]     # how SmolLM2 cuts the test paragraph
# The largest shift and stretch the lab runs on SmolLM2 (chapters/04_position_lab.ipynb): three times its
# 8,192-token context, and 8. The lab asserts that these two numbers are the ones it ran.
SMOLLM2_CONTEXT = 8192
SHIFT = 3 * SMOLLM2_CONTEXT
STRETCH = 8
# (name, positions, note, colour); names and notes are templates for str.format(shift=..., stretch=...)
ROWS = [("as trained", [0, 1, 2, 3, 4], "distance between neighbours: 1", "#eeeeee"),
        ("shifted by {shift:,}", [SHIFT + i for i in range(5)], "positions never seen, distances as usual", "#c6dbf7"),
        ("stretched ×{stretch}", [STRETCH * i for i in range(5)], "distances {stretch} times larger", "#f7c6d0")]


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"  # keep text as text in the SVG
    fig, ax = plt.subplots(figsize=(9, 2.8))
    for r, (name, positions, note, colour) in enumerate(ROWS):
        y = 2.0 - r * 0.95
        ax.text(-0.2, y + 0.3, t(name).format(shift=SHIFT, stretch=STRETCH), ha="right", va="center", fontsize=10, fontweight="bold")
        for k, (token, pos) in enumerate(zip(TOKENS, positions)):
            x = k * 1.65
            ax.add_patch(FancyBboxPatch((x, y), 1.45, 0.6, boxstyle="round,pad=0.02,rounding_size=0.08",
                                        facecolor=colour, edgecolor="#555555", linewidth=1.0))
            ax.text(x + 0.72, y + 0.4, repr(token)[1:-1], ha="center", va="center", fontsize=7.5,
                    family="monospace")
            ax.text(x + 0.72, y + 0.14, t("pos {pos}").format(pos=pos), ha="center", va="center", fontsize=8, color="#1f4e99")
        ax.text(len(TOKENS) * 1.65 + 0.1, y + 0.3, t(note).format(stretch=STRETCH), va="center", fontsize=9, color="#333333")
    ax.set_xlim(-2.6, 12.6)
    ax.set_ylim(-0.05, 2.75)
    ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
