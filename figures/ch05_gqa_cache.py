"""Chapter 5 diagram: what a GQA layer keeps in its KV cache, and how query heads share it.

Run from the repository root: python figures/ch05_gqa_cache.py
writes figures/generated/ch05_gqa_cache.svg
and, in Chinese, ch05_gqa_cache.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from _svg import LANGUAGES, mono, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch05_gqa_cache.svg")
ZH = {
    "KV head {g}": "KV 头 {g}", "one (K, V) column per past token": "每个已有词元一列 (K, V)",
    "cached per token and layer:\nMHA  2 × 9 × 64 = 1,152 numbers\nGQA  2 × 3 × 64 =   384 numbers\n"
    "each KV head serves 3 query heads\n(repeat_kv copies it for the scores)":
        "每个词元、每层缓存：\nMHA  2 × 9 × 64 = 1,152 个数\nGQA  2 × 3 × 64 =   384 个数\n"
        "每个 KV 头服务 3 个查询头\n（算分数时 repeat_kv 复制它）",
}
GROUPS = ["#4c72b0", "#55a868", "#c44e52"]
N_Q, N_KV, T = 9, 3, 6   # SmolLM2: 9 query heads, 3 KV heads; 6 cached positions drawn


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, ax = plt.subplots(figsize=(9.5, 3.3))
    rep = N_Q // N_KV
    for h in range(N_Q):
        g = h // rep
        x = h * 0.75
        ax.add_patch(Rectangle((x, 3.0), 0.6, 0.45, facecolor=GROUPS[g], edgecolor="white"))
        ax.text(x + 0.3, 3.22, f"q{h}", ha="center", va="center", color="white", fontsize=8, fontweight="bold")
        kx = 0.4 + g * 2.3 + 0.9
        ax.plot([x + 0.3, kx], [3.0, 2.55], color=GROUPS[g], lw=1)
    for g in range(N_KV):
        x0 = 0.4 + g * 2.3
        for kind, y in [("K", 1.45), ("V", 0.55)]:
            for pos in range(T):
                ax.add_patch(Rectangle((x0 + pos * 0.3, y), 0.28, 0.6, facecolor=GROUPS[g], alpha=0.35 + 0.1 * (pos % 2),
                                       edgecolor="white"))
            ax.text(x0 - 0.1, y + 0.3, kind + str(g), ha="right", va="center", fontsize=8.5)
        ax.text(x0 + 0.9, 2.2, t("KV head {g}").format(g=g), ha="center", va="bottom", fontsize=8.5)
    ax.annotate("", xy=(0.4 + 1.8, 0.35), xytext=(0.4, 0.35), arrowprops=dict(arrowstyle="-|>", color="#555555"))
    ax.text(0.4, 0.12, t("one (K, V) column per past token"), fontsize=8, va="top")
    ax.text(7.3, 2.4, t("cached per token and layer:\n"
                       "MHA  2 × 9 × 64 = 1,152 numbers\n"
                       "GQA  2 × 3 × 64 =   384 numbers\n"
                       "each KV head serves 3 query heads\n"
                       "(repeat_kv copies it for the scores)"),
            fontsize=8.5, va="top", family=mono(language))
    ax.set_xlim(-0.3, 11.0)
    ax.set_ylim(-0.2, 3.6)
    ax.axis("off")
    fig.tight_layout()
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
