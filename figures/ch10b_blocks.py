"""Chapter 10b diagram: a row of float weights is cut into blocks of 32; each block is stored as
two 16-bit numbers (a step d and a minimum m) and 32 small integer codes of 4 bits, and read back as
w = d * q + m. 32 float32 weights take 128 bytes; the block takes 20.

Run from the repository root: python figures/ch10b_blocks.py
writes figures/generated/ch10b_blocks.svg
and, in Chinese, ch10b_blocks.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch10b_blocks.svg")
ZH = {
    "one row of a weight matrix, float32: 4 bytes a weight": "权重矩阵的一行，float32：每个权重 4 字节",
    "block {b}: 32 weights": "第 {b} 块：32 个权重", "block 0 (8 of its 32 weights shown)": "第 0 块（只画出 32 个权重中的 8 个）",
    "what the file stores: 20 bytes for 32 weights (5 bits a weight)": "文件存储的内容：32 个权重共 20 字节（每个权重 5 位）",
    "two 16-bit numbers": "两个 16 位数", "one 4-bit code q (0 to 15) per weight": "每个权重一个 4 位编码 q（0 到 15）",
    "the block's 16 levels: w = d·q + m": "该块的 16 个量化等级：w = d·q + m",
    "o weight   x its level (at most half a step away)": "o 权重   x 它被量化到的等级（最多差半个步长）",
}
FLOAT, SCALE, CODE, GRID = "#4c72b0", "#dd8452", "#55a868", "#bbbbbb"


def box(ax, x, y, w, h, colour, text="", text_colour="white", size=7):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=colour, edgecolor="white", lw=1))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, color=text_colour)


def arrow(ax, start, end):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color="#666666", lw=1))


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    rng = np.random.default_rng(3)
    weights = np.round(rng.normal(0, 0.03, 8), 3)
    lo, hi = weights.min(), weights.max()
    d = (hi - lo) / 15
    codes = np.round((weights - lo) / d).astype(int)

    fig, ax = plt.subplots(figsize=(10, 4.2))
    # Row 1: a matrix row of float32 weights, cut into blocks of 32.
    ax.text(0, 4.45, t("one row of a weight matrix, float32: 4 bytes a weight"), fontsize=9, fontweight="bold")
    for b in range(4):
        for i in range(8):
            box(ax, b * 2.6 + i * 0.3, 3.75, 0.28, 0.5, FLOAT if b == 0 else "#9db4d6")
        ax.text(b * 2.6 + 1.2, 3.55, t("block {b}: 32 weights").format(b=b) if b < 3 else "...", ha="center", fontsize=7)
    # Row 2: block 0 zoomed, its (shortened) values.
    ax.text(0, 2.85, t("block 0 (8 of its 32 weights shown)"), fontsize=8)
    for i, w in enumerate(weights):
        box(ax, i * 0.9, 2.2, 0.85, 0.5, FLOAT, f"{w:+.3f}")
    arrow(ax, (1.2, 3.5), (1.2, 2.95))
    # Row 3: what is stored: d, m and the 4-bit codes.
    ax.text(0, 1.45, t("what the file stores: 20 bytes for 32 weights (5 bits a weight)"), fontsize=9, fontweight="bold")
    box(ax, 0, 0.7, 1.25, 0.5, SCALE, f"d = {d:.4f}")
    box(ax, 1.3, 0.7, 1.25, 0.5, SCALE, f"m = {lo:+.3f}")
    for i, q in enumerate(codes):
        box(ax, 2.75 + i * 0.55, 0.7, 0.5, 0.5, CODE, str(q))
    ax.text(0.0, 0.45, t("two 16-bit numbers"), fontsize=7, color="#555555")
    ax.text(2.75, 0.45, t("one 4-bit code q (0 to 15) per weight"), fontsize=7, color="#555555")
    arrow(ax, (3.6, 2.15), (3.6, 1.6))
    ax.text(3.75, 1.85, "q = round((w - m) / d)", fontsize=8, color="#333333")
    # Right: the 16 levels the block can take.
    gx = 8.2
    ax.text(gx, 2.85, t("the block's 16 levels: w = d·q + m"), fontsize=8)
    for k in range(16):
        y = 0.7 + k * (2.0 / 15)
        ax.plot([gx, gx + 2.2], [y, y], color=GRID, lw=0.8)
    for w, q in zip(weights, codes):
        y_true = 0.7 + (w - lo) / d * (2.0 / 15)
        y_level = 0.7 + q * (2.0 / 15)
        x = gx + 0.2 + (w - lo) / (hi - lo) * 1.8
        ax.plot(x, y_true, "o", color=FLOAT, ms=4)
        ax.plot(x, y_level, "x", color=CODE, ms=5)
    ax.text(gx, 0.4, t("o weight   x its level (at most half a step away)"), fontsize=7, color="#555555")
    ax.set_xlim(-0.2, 10.6)
    ax.set_ylim(0.3, 4.7)
    ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
