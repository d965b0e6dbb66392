"""Chapter 11 diagram: FlashAttention-style tiling of causal attention.

The T x T score matrix is cut into tiles. For one block of queries (a row of tiles) the kernel
walks over the key blocks from left to right, keeping a running max m, sum l and output acc;
tiles entirely in the future are skipped, diagonal tiles are masked inside.

Run from the repository root: python figures/ch11_tiling.py
writes figures/generated/ch11_tiling.svg
and, in Chinese, ch11_tiling.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Polygon, Rectangle  # noqa: E402
from _svg import LANGUAGES, mono, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch11_tiling.svg")
CODE = ["m = -inf,  l = 0,  acc = 0", "m_new = max(m, rowmax(s))", "p = exp(s - m_new)",
        "l = l * exp(m - m_new) + rowsum(p)", "acc = acc * exp(m - m_new) + p @ v_b", "out_b = acc / l"]
ZH = {
    **{line: line for line in CODE},          # pure code reads the same in both languages
    "tile\nin use": "正在处理\n的分块", "keys and values, in blocks  ->": "键和值，按块划分  ->",
    "queries, in blocks  ->": "查询，按块划分  ->",
    "hatched: masked inside the tile;  white: future, skipped": "斜线：在分块内部做掩码；  白色：未来位置，跳过",
    "for each query block  q_b:": "对每个查询块  q_b：",
    "for each key block  k_b, v_b  (past and diagonal only):": "对每个键块  k_b, v_b（只取过去和对角线上的）：",
    "s = q_b @ k_b^T * scale          one tile of scores": "s = q_b @ k_b^T * scale          一块分数",
    "m = m_new                        the tile is dropped": "m = m_new                        丢弃这一块",
    "memory in use: q, k, v, out and one tile,\nnever the T x T matrix": "占用的内存：q、k、v、out 和一个分块，\n从不存放 T x T 矩阵",
}
N = 6            # tiles per side
DONE, CURRENT, LATER, SKIPPED = "#c8d6e8", "#55a868", "#eeeeee", "white"
ROW = 3          # the query block being processed
COL = 2          # the key block being processed right now


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [1.1, 1]})
    for i in range(N):            # query block (row, from the top)
        for j in range(N):        # key block (column)
            y = N - 1 - i
            if j > i:
                colour, text = SKIPPED, ""
            elif i < ROW or (i == ROW and j < COL):
                colour, text = DONE, ""
            elif i == ROW and j == COL:
                colour, text = CURRENT, t("tile\nin use")
            else:
                colour, text = LATER, ""
            ax.add_patch(Rectangle((j, y), 1, 1, facecolor=colour, edgecolor="#999999", lw=1))
            if text:
                ax.text(j + 0.5, y + 0.5, text, ha="center", va="center", fontsize=8, color="white")
            if i == j:            # diagonal tiles: the causal mask cuts through them
                ax.add_patch(Polygon([(j, y + 1), (j + 1, y + 1), (j + 1, y)], closed=True,
                                     facecolor="white", edgecolor="#999999", hatch="///", lw=0.5))
    ax.add_patch(FancyArrowPatch((0.1, N - ROW - 0.5), (ROW + 0.9, N - ROW - 0.5), arrowstyle="-|>",
                                 mutation_scale=12, color="#333333", lw=1.2, ls="--"))
    ax.set_xlim(-0.2, N + 0.2)
    ax.set_ylim(-0.6, N + 0.6)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.text(N / 2, N + 0.25, t("keys and values, in blocks  ->"), ha="center", fontsize=9)
    ax.text(-0.15, N / 2, t("queries, in blocks  ->"), ha="right", va="center", rotation=90, fontsize=9)
    ax.text(N / 2, -0.45, t("hatched: masked inside the tile;  white: future, skipped"), ha="center",
            fontsize=8, color="#555555")

    bx.axis("off")
    lines = [
        ("for each query block  q_b:", 0),
        ("m = -inf,  l = 0,  acc = 0", 1),
        ("for each key block  k_b, v_b  (past and diagonal only):", 1),
        ("s = q_b @ k_b^T * scale          one tile of scores", 2),
        ("m_new = max(m, rowmax(s))", 2),
        ("p = exp(s - m_new)", 2),
        ("l = l * exp(m - m_new) + rowsum(p)", 2),
        ("acc = acc * exp(m - m_new) + p @ v_b", 2),
        ("m = m_new                        the tile is dropped", 2),
        ("out_b = acc / l", 1),
    ]
    for k, (text, indent) in enumerate(lines):
        bx.text(0.02 + 0.06 * indent, 0.92 - k * 0.085, t(text), family=mono(language), fontsize=8.5,
                transform=bx.transAxes)
    bx.text(0.02, 0.02, t("memory in use: q, k, v, out and one tile,\nnever the T x T matrix"),
            fontsize=9, color=CURRENT, transform=bx.transAxes, fontweight="bold")
    fig.tight_layout()
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
