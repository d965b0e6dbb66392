"""Chapter 4 diagram: the two position experiments on SmolLM2. Shifting adds the same offset to every
position id (distances unchanged); stretching multiplies them (distances grow). Run from the repository
root; writes figures/generated/ch04_shift_stretch.svg."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch
from _svg import save_svg  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch04_shift_stretch.svg")
TOKENS = ["The", " old", " lighthouse", " stood", " at"]     # how SmolLM2 cuts the test paragraph
ROWS = [("as trained", [0, 1, 2, 3, 4], "distance between neighbours: 1", "#eeeeee"),
        ("shifted by 8,192", [8192, 8193, 8194, 8195, 8196], "positions never seen, distances as usual", "#c6dbf7"),
        ("stretched ×8", [0, 8, 16, 24, 32], "distances 8 times larger", "#f7c6d0")]


def main() -> None:
    plt.rcParams["svg.fonttype"] = "none"  # keep text as text in the SVG
    fig, ax = plt.subplots(figsize=(9, 2.8))
    for r, (name, positions, note, colour) in enumerate(ROWS):
        y = 2.0 - r * 0.95
        ax.text(-0.2, y + 0.3, name, ha="right", va="center", fontsize=10, fontweight="bold")
        for k, (token, pos) in enumerate(zip(TOKENS, positions)):
            x = k * 1.35
            ax.add_patch(FancyBboxPatch((x, y), 1.15, 0.6, boxstyle="round,pad=0.02,rounding_size=0.08",
                                        facecolor=colour, edgecolor="#555555", linewidth=1.0))
            ax.text(x + 0.57, y + 0.4, repr(token)[1:-1], ha="center", va="center", fontsize=7.5,
                    family="monospace")
            ax.text(x + 0.57, y + 0.14, f"pos {pos}", ha="center", va="center", fontsize=8, color="#1f4e99")
        ax.text(len(TOKENS) * 1.35 + 0.1, y + 0.3, note, va="center", fontsize=9, color="#333333")
    ax.set_xlim(-2.3, 11.0)
    ax.set_ylim(-0.05, 2.75)
    ax.axis("off")
    save_svg(fig, OUT, bbox_inches="tight")


if __name__ == "__main__":
    main()
