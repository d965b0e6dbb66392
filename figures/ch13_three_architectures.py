"""Chapter 13 diagram: the three ways to wire a Transformer.

encoder-only (BERT): a bidirectional stack reads the whole input, a head fills in masked tokens;
decoder-only (GPT, Llama, Gemma): a causal stack predicts the next token;
encoder-decoder (2017, T5): the decoder's cross-attention reads the encoder's output.

Run from the repository root: python figures/ch13_three_architectures.py
writes figures/generated/ch13_three_architectures.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import save_svg  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch13_three_architectures.svg")
ENC, DEC, HEAD, IO = "#b9e3c6", "#c6dbf7", "#f7c6d0", "#eeeeee"


def box(ax, x, y, w, h, title, sub, colour):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=colour, edgecolor="#555555", linewidth=1.1))
    ax.text(x + w / 2, y + h * (0.64 if sub else 0.5), title, ha="center", va="center", fontsize=10,
            fontweight="bold")
    if sub:
        ax.text(x + w / 2, y + h * 0.28, sub, ha="center", va="center", fontsize=8.5, color="#333333")


def arrow(ax, x0, y0, x1, y1, colour="#333333", text=None):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="->", color=colour, lw=1.4))
    if text:
        ax.text((x0 + x1) / 2 + 0.05, (y0 + y1) / 2, text, fontsize=8.5, color=colour, ha="left", va="center")


def main() -> None:
    plt.rcParams["svg.fonttype"] = "none"  # keep text as text in the SVG
    plt.rcParams["font.family"] = ["DejaVu Sans", "Noto Sans CJK SC"]  # CJK fallback for the Chinese labels
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), gridspec_kw={"width_ratios": [1, 1, 2.5]})
    w, h = 2.5, 0.9

    ax = axes[0]
    ax.set_title("encoder-only (BERT)", fontsize=11)
    box(ax, 0.25, 0.2, w, 0.6, "the [MASK] sat", "", IO)
    box(ax, 0.25, 1.3, w, h, "encoder blocks × L", "self-attention:\nevery token sees all", ENC)
    box(ax, 0.25, 2.7, w, 0.7, "MLM head", "predict the masked", HEAD)
    box(ax, 0.25, 3.8, w, 0.5, '"cat"', "", IO)
    arrow(ax, 1.5, 0.8, 1.5, 1.3)
    arrow(ax, 1.5, 2.2, 1.5, 2.7)
    arrow(ax, 1.5, 3.4, 1.5, 3.8)

    ax = axes[1]
    ax.set_title("decoder-only (GPT, Llama, Gemma)", fontsize=11)
    box(ax, 0.25, 0.2, w, 0.6, "the cat sat", "", IO)
    box(ax, 0.25, 1.3, w, h, "decoder blocks × L", "causal self-attention:\nonly the past", DEC)
    box(ax, 0.25, 2.7, w, 0.7, "LM head", "next token", HEAD)
    box(ax, 0.25, 3.8, w, 0.5, '"on"', "", IO)
    arrow(ax, 1.5, 0.8, 1.5, 1.3)
    arrow(ax, 1.5, 2.2, 1.5, 2.7)
    arrow(ax, 1.5, 3.4, 1.5, 3.8)

    ax = axes[2]
    ax.set_title("encoder-decoder (2017 Transformer, T5)", fontsize=11)
    w3, xd = 3.1, 4.8                         # wider boxes: the labels name two layer counts
    box(ax, 0.0, 0.2, w3, 0.6, "source: I love tea", "", IO)
    box(ax, 0.0, 1.3, w3, h, "encoder blocks × L_enc", "bidirectional\nself-attention", ENC)
    box(ax, xd, 0.2, w3, 0.6, "target so far: 我 爱", "", IO)
    box(ax, xd, 1.3, w3, 1.3, "decoder blocks × L_dec", "causal self-attention\n+ cross-attention\n+ FFN", DEC)
    box(ax, xd, 3.0, w3, 0.6, "LM head", "", HEAD)
    box(ax, xd, 3.9, w3, 0.45, '"茶"', "", IO)
    arrow(ax, w3 / 2, 0.8, w3 / 2, 1.3)
    arrow(ax, xd + w3 / 2, 0.8, xd + w3 / 2, 1.3)
    arrow(ax, w3, 1.75, xd, 1.75, colour="#c44e52")
    middle = (w3 + xd) / 2
    ax.text(middle, 1.85, "memory:\nkeys, values", fontsize=8.5, color="#c44e52", ha="center", va="bottom")
    ax.text(middle, 1.62, "queries come\nfrom the decoder", fontsize=8, color="#555555", ha="center", va="top")
    arrow(ax, xd + w3 / 2, 2.6, xd + w3 / 2, 3.0)
    arrow(ax, xd + w3 / 2, 3.6, xd + w3 / 2, 3.9)

    for ax, width in zip(axes, [3.0, 3.0, 8.0]):
        ax.set_xlim(-0.1, width)
        ax.set_ylim(0, 4.5)
        ax.axis("off")
    save_svg(fig, OUT, bbox_inches="tight")


if __name__ == "__main__":
    main()
