"""Chapter 15 diagram: the logit lens reads the residual stream after every block through the
model's own final norm and LM head, as if that block were the last.

Run from the repository root: python figures/ch15_logit_lens.py
writes figures/generated/ch15_logit_lens.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import save_svg  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch15_logit_lens.svg")
BLOCK, READ, TOKEN = "#c6dbf7", "#f7c6d0", "#eeeeee"


def box(ax, x, y, w, h, text, colour, size=9.5, bold=False):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                facecolor=colour, edgecolor="#555555", linewidth=1.0))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
            fontweight="bold" if bold else "normal")


def arrow(ax, x0, y0, x1, y1, colour="#333333", style="->"):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle=style, color=colour, lw=1.3))


def main() -> None:
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(9, 5.2))
    rows = [("emb", "' of'"), ("block 0", "' of'"), ("...", "junk"), ("block 11", "' cities'"),
            ("block 12", "' Eiffel'"), ("block 13", "' Paris'"), ("...", "' Paris'"), ("block 17", "' Paris'")]
    for k, (name, top) in enumerate(rows):
        y = 0.3 + k * 0.6
        if name == "...":
            ax.text(1.0, y + 0.2, "⋮", ha="center", va="center", fontsize=14)
            ax.text(6.9, y + 0.2, "⋮", ha="center", va="center", fontsize=14)
            continue
        box(ax, 0.3, y, 1.4, 0.42, name, BLOCK if name != "emb" else TOKEN)
        arrow(ax, 1.75, y + 0.21, 3.0, y + 0.21, colour="#c44e52")
        box(ax, 3.0, y, 2.6, 0.42, "final norm → LM head", READ, size=8.5)
        arrow(ax, 5.65, y + 0.21, 6.2, y + 0.21)
        box(ax, 6.2, y, 1.4, 0.42, top, TOKEN, size=9, bold=top == "' Paris'")
    arrow(ax, 1.0, 0.05, 1.0, 0.3, colour="#777777")
    ax.text(1.0, -0.05, "The Eiffel Tower is in the city of", ha="center", va="top", fontsize=8.5)
    ax.text(2.35, 5.15, "residual stream\nafter each block", ha="center", va="bottom", fontsize=8.5, color="#c44e52")
    ax.text(4.3, 5.15, "the model's own readout,\nused after every block", ha="center", va="bottom", fontsize=8.5)
    ax.text(6.9, 5.15, "top token\n(last position)", ha="center", va="bottom", fontsize=8.5)
    ax.text(7.9, 0.3 + 7 * 0.6 + 0.21, "= the model's\n   own output", fontsize=8, va="center", color="#555555")
    ax.set_xlim(0, 9)
    ax.set_ylim(-0.4, 5.8)
    ax.axis("off")
    save_svg(fig, OUT, bbox_inches="tight")


if __name__ == "__main__":
    main()
