"""Chapter 3 diagram: an embedding lookup is a one-hot row vector times the (V, d) table; the 1 at
position i selects row i. Run from the repository root;
writes figures/generated/ch03_lookup.svg and, in Chinese, ch03_lookup.zh_CN.svg."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch03_lookup.svg")
ZH = {   # mathtext draws no CJK glyphs, so the Chinese label writes e_i with a Unicode subscript
    "one-hot $e_i$, token id i = {chosen}\nshape (1, V)": "独热向量 eᵢ，词元 id i = {chosen}\n形状 (1, V)",
    "row {r}": "第 {r} 行", "table E: shape (V, d)": "表 E：形状 (V, d)",
    "row {chosen} of E: shape (1, d)": "E 的第 {chosen} 行：形状 (1, d)",
    "a lookup E[i] gives the same numbers\nwithout the V·d multiplications": "查表 E[i] 得到同样的数，\n却省去了 V·d 次乘法",
}
V, D, CHOSEN = 8, 5, 3            # a toy vocabulary of 8 tokens, vectors of 5 numbers, token id 3
SELECTED, OTHER, CELL = "#b9e3c6", "#f4f4f4", 0.5


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"  # keep text as text in the SVG
    fig, ax = plt.subplots(figsize=(9, 3.4))
    # the one-hot vector e_i: a row of V entries
    for j in range(V):
        ax.add_patch(Rectangle((j * CELL, 2.0), CELL, CELL, facecolor=SELECTED if j == CHOSEN else OTHER,
                               edgecolor="#555555"))
        ax.text(j * CELL + CELL / 2, 2.0 + CELL / 2, "1" if j == CHOSEN else "0", ha="center", va="center",
                fontsize=10, family="monospace")
    ax.text(V * CELL / 2, 2.75, t("one-hot $e_i$, token id i = {chosen}\nshape (1, V)").format(chosen=CHOSEN), ha="center", fontsize=10)
    ax.text(V * CELL + 0.45, 2.0 + CELL / 2, "×", ha="center", va="center", fontsize=16)
    # the table E: V rows of D numbers
    x0 = V * CELL + 1.5
    for r in range(V):
        for c in range(D):
            ax.add_patch(Rectangle((x0 + c * CELL, 3.5 - (r + 1) * CELL * 0.8), CELL, CELL * 0.8,
                                   facecolor=SELECTED if r == CHOSEN else OTHER, edgecolor="#999999", lw=0.6))
        ax.text(x0 - 0.1, 3.5 - (r + 0.5) * CELL * 0.8, t("row {r}").format(r=r), ha="right", va="center", fontsize=8,
                color="#1f6e2a" if r == CHOSEN else "#777777")
    ax.text(x0 + D * CELL / 2, 3.65, t("table E: shape (V, d)"), ha="center", fontsize=10)
    ax.text(x0 + D * CELL + 0.55, 2.0 + CELL / 2, "=", ha="center", va="center", fontsize=16)
    # the result: row i
    x1 = x0 + D * CELL + 0.8 + 0.4
    for c in range(D):
        ax.add_patch(Rectangle((x1 + c * CELL, 2.0), CELL, CELL, facecolor=SELECTED, edgecolor="#555555"))
    ax.text(x1 + D * CELL / 2, 2.75, t("row {chosen} of E: shape (1, d)").format(chosen=CHOSEN), ha="center", fontsize=10)
    # the note sits below the table's last row (y = 3.5 - V * 0.8 * CELL), clear of every box
    bottom = 3.5 - V * CELL * 0.8
    ax.text(x1 + D * CELL / 2, 1.75, t("a lookup E[i] gives the same numbers\nwithout the V·d multiplications"),
            ha="center", va="top", fontsize=9, color="#333333")
    ax.set_xlim(-0.3, x1 + D * CELL + 0.6)
    ax.set_ylim(bottom - 0.15, 3.9)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
