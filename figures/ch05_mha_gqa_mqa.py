"""Chapter 5 diagram: which query heads share a key/value head in MHA, GQA and MQA.

Run from the repository root: python figures/ch05_mha_gqa_mqa.py
writes figures/generated/ch05_mha_gqa_mqa.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import save_svg  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch05_mha_gqa_mqa.svg")
QUERY, KV = "#4c72b0", "#dd8452"
N_Q = 6  # query heads drawn in every panel


def box(ax, x, y, text, colour):
    ax.add_patch(FancyBboxPatch((x - 0.32, y - 0.22), 0.64, 0.44, boxstyle="round,pad=0.02",
                                facecolor=colour, edgecolor="none"))
    ax.text(x, y, text, ha="center", va="center", color="white", fontsize=9, fontweight="bold")


def panel(ax, title, n_kv):
    group = N_Q // n_kv
    kv_x = [(g * group + (group - 1) / 2) for g in range(n_kv)]  # each KV head centred over its group
    for h in range(N_Q):
        g = h // group
        ax.plot([h, kv_x[g]], [1.78, 0.22], color="#999999", lw=1, zorder=0)
        box(ax, h, 2.0, f"q{h}", QUERY)
    for g, x in enumerate(kv_x):
        box(ax, x, 0.0, f"kv{g}", KV)
    ax.set_title(title, fontsize=11)
    ax.set_xlim(-0.6, N_Q - 0.4)
    ax.set_ylim(-0.5, 2.5)
    ax.axis("off")


def main():
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.6))
    panel(axes[0], "MHA: one KV head per query head", N_Q)
    panel(axes[1], "GQA: groups of 3 share one KV head", 2)
    panel(axes[2], "MQA: all share one KV head", 1)
    fig.text(0.5, 0.01, "SmolLM2-135M: GQA, 9 query heads / 3 KV heads.   Gemma-3-270M: MQA, 4 query heads / 1 KV head.",
             ha="center", fontsize=9, color="#444444")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    save_svg(fig, OUT)


if __name__ == "__main__":
    main()
