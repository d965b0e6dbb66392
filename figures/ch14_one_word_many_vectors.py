"""Chapter 14 diagram: the same token starts as the same row of the embedding table in every
sentence; block by block, attention mixes in the context and the vectors move apart.

The angles are measured, not invented: at each drawn depth, the angle between the two arrows is the
mean angle between the last-token vectors of a fruit sentence and a company sentence in the lesson's
24 frame-balanced sentences on SmolLM2 (arccos of the mean cosine that its first plot shows). The
lesson checks that CROSS_SENSE_COSINE below holds its measured values. Lengths are not to scale.

Run from the repository root: python figures/ch14_one_word_many_vectors.py
writes figures/generated/ch14_one_word_many_vectors.svg
and, in Chinese, ch14_one_word_many_vectors.zh_CN.svg
"""
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch14_one_word_many_vectors.svg")
# depth -> mean cosine between different-sense vectors of " apple" on SmolLM2 (depth 0 = the embedding,
# depth i = after block i-1), rounded to 3 decimals; chapter 14's lesson asserts these against its measurement
CROSS_SENSE_COSINE = {0: 1.0, 1: 0.996, 10: 0.931, 20: 0.914, 30: 0.785}
NOTE = "angle between the arrows: arccos of the mean cosine of 144 fruit-company pairs on SmolLM2; lengths not to scale"
ZH = {
    "embedding": "嵌入", "after block {n}": "第 {n} 块之后",
    "one row of the\nembedding table:\nthe same in both": "嵌入表中的\n同一行：\n两句都一样",
    "“... the sweet juice\nfrom apple”": "“... the sweet juice\nfrom apple”",        # the sentences stay English
    "“... the new software\nfrom apple”": "“... the new software\nfrom apple”",
    "the vector of the last token ' apple', block by block": "最后一个词元 ' apple' 的向量，一块一块地变化",
    "cosine {c:.3f}\nangle {a:.0f}°": "余弦 {c:.3f}\n夹角 {a:.0f}°",
    NOTE: "两个箭头的夹角：SmolLM2 上 144 对水果句与公司句余弦均值的反余弦；长度不按比例",
}


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    length = 1.45
    for k, (depth, cosine) in enumerate(CROSS_SENSE_COSINE.items()):
        x = k * 1.8
        half = math.acos(cosine) / 2                     # each arrow half the measured angle off the middle line
        ends = [(x + length * math.cos(half), side * length * math.sin(half)) for side in (1, -1)]   # fruit, company
        if depth == 0:   # the same row of the table for both sentences: one arrow
            ax.annotate("", xy=ends[0], xytext=(x, 0), arrowprops=dict(arrowstyle="->", color="#555555", lw=2))
        else:
            for (ex, ey), color in zip(ends, ["#55a868", "#4c72b0"]):
                ax.annotate("", xy=(ex, ey), xytext=(x, 0), arrowprops=dict(arrowstyle="->", color=color, lw=2))
            ax.text(x + 0.7, -1.15, t("cosine {c:.3f}\nangle {a:.0f}°").format(c=cosine, a=math.degrees(2 * half)),
                    ha="center", va="top", fontsize=8)
        label = t("embedding") if depth == 0 else t("after block {n}").format(n=depth - 1)
        ax.text(x + 0.7, -1.9, label, ha="center", fontsize=8.5)
    ax.text(0.0, 0.25, t("one row of the\nembedding table:\nthe same in both"), fontsize=8, va="bottom")
    last = 1.8 * (len(CROSS_SENSE_COSINE) - 1)
    ax.text(last + 1.5, 0.55, t("“... the sweet juice\nfrom apple”"), fontsize=8.5, color="#55a868", va="center")
    ax.text(last + 1.5, -0.55, t("“... the new software\nfrom apple”"), fontsize=8.5, color="#4c72b0", va="center")
    ax.text(3.9, 1.55, t("the vector of the last token ' apple', block by block"), ha="center", fontsize=10)
    ax.text(3.9, -2.35, t(NOTE),
            ha="center", fontsize=7.5, color="#555555")
    ax.set_xlim(-0.3, 10.4)
    ax.set_ylim(-2.5, 1.8)
    ax.set_aspect("equal")                               # so that the drawn angles are the true angles
    ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
