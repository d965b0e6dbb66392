"""Chapter 5 diagram: which query heads share a key/value head in MHA, GQA and MQA.

Run from the repository root: python figures/ch05_mha_gqa_mqa.py
writes figures/generated/ch05_mha_gqa_mqa.svg
and, in Chinese, ch05_mha_gqa_mqa.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch05_mha_gqa_mqa.svg")
ZH = {
    "MHA: one KV head per query head": "MHA：每个查询头一个 KV 头", "GQA: groups of 3 share one KV head": "GQA：每 3 个查询头共享一个 KV 头",
    "MQA: all share one KV head": "MQA：所有查询头共享一个 KV 头",
    "SmolLM2-135M: GQA, 9 query heads / 3 KV heads.   Gemma-3-270M: MQA, 4 query heads / 1 KV head.":
        "SmolLM2-135M：GQA，9 个查询头 / 3 个 KV 头。   Gemma-3-270M：MQA，4 个查询头 / 1 个 KV 头。",
}
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


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.6))
    panel(axes[0], t("MHA: one KV head per query head"), N_Q)
    panel(axes[1], t("GQA: groups of 3 share one KV head"), 2)
    panel(axes[2], t("MQA: all share one KV head"), 1)
    fig.text(0.5, 0.01, t("SmolLM2-135M: GQA, 9 query heads / 3 KV heads.   Gemma-3-270M: MQA, 4 query heads / 1 KV head."),
             ha="center", fontsize=9, color="#444444")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
