"""Chapter 1 diagram: text -> tokenizer -> embedding -> N blocks -> final norm -> LM head -> probabilities,
with the tensor shape written on every arrow. Run from the repository root; writes
figures/generated/ch01_pipeline.svg."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch
from _svg import save_svg  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch01_pipeline.svg")

# (label, sublabel, colour) for each stage, left to right
STAGES = [
    ("text", '"The capital\nof France is"', "#eeeeee"),
    ("tokenizer", "text → ids", "#fde2a7"),
    ("embedding", "id → row of\na (V, d) table", "#b9e3c6"),
    ("block 0 … N−1", "attention + FFN\n(mix, then think)", "#c6dbf7"),
    ("final norm", "RMSNorm", "#e3d1f7"),
    ("LM head", "(d → V) matrix", "#f7c6d0"),
    ("softmax", "scores →\nprobabilities", "#f7dcc6"),
]
# the tensor that flows along each arrow
SHAPES = ["str", "(1, T)\nints", "(1, T, d)", "(1, T, d)", "(1, T, d)", "(1, T, V)\nlogits"]


def main() -> None:
    plt.rcParams["svg.fonttype"] = "none"  # keep text as text in the SVG
    fig, ax = plt.subplots(figsize=(13, 2.3))
    width, gap, height = 1.9, 0.55, 1.2
    for i, (name, sub, colour) in enumerate(STAGES):
        x = i * (width + gap)
        ax.add_patch(FancyBboxPatch((x, 0), width, height, boxstyle="round,pad=0.03,rounding_size=0.12",
                                    facecolor=colour, edgecolor="#555555", linewidth=1.2))
        ax.text(x + width / 2, height * 0.72, name, ha="center", va="center", fontsize=10.5, fontweight="bold")
        ax.text(x + width / 2, height * 0.32, sub, ha="center", va="center", fontsize=9.5, color="#333333")
        if i < len(SHAPES):
            x0, x1 = x + width + 0.04, x + width + gap - 0.04
            ax.annotate("", xy=(x1, height / 2), xytext=(x0, height / 2),
                        arrowprops=dict(arrowstyle="->", color="#333333", lw=1.4))
            ax.text((x0 + x1) / 2, height + 0.1, SHAPES[i], ha="center", va="bottom", fontsize=10,
                    family="monospace", color="#1f4e99")
    total = len(STAGES) * (width + gap) - gap
    ax.set_xlim(-0.1, total + 0.1)
    ax.set_ylim(-0.1, height + 0.65)
    ax.axis("off")
    save_svg(fig, OUT, bbox_inches="tight")


if __name__ == "__main__":
    main()
