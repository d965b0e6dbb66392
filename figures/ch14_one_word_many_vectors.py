"""Chapter 14 diagram: the same token starts as the same row of the embedding table in every
sentence; block by block, attention mixes in the context and the vectors move apart.

Run from the repository root: python figures/ch14_one_word_many_vectors.py
writes figures/generated/ch14_one_word_many_vectors.svg
and, in Chinese, ch14_one_word_many_vectors.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch14_one_word_many_vectors.svg")
ZH = {
    "embedding": "嵌入", "after block {n}": "第 {n} 块之后",
    "one row of the\nembedding table:\nthe same in both": "嵌入表中的\n同一行：\n两句都一样",
    "“... the sweet juice\nfrom apple”": "“... the sweet juice\nfrom apple”",        # the sentences stay English
    "“... the new software\nfrom apple”": "“... the new software\nfrom apple”",
    "the vector of the last token ' apple', block by block": "最后一个词元 ' apple' 的向量，一块一块地变化",
}


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    depths = [0, 1, 2, 3, 4]
    fruit = [(0.7, 0.1), (0.35, 0.45), (0.55, 0.9), (0.7, 1.3), (0.8, 1.6)]
    company = [(0.7, 0.1), (0.35, -0.35), (0.6, -0.75), (0.75, -1.15), (0.85, -1.5)]
    for (dx, dy), (cx, cy), d in zip(fruit, company, depths):
        x = d * 1.8
        if d == 0:   # the same row of the table for both sentences: one arrow
            ax.annotate("", xy=(x + dx, dy), xytext=(x, 0), arrowprops=dict(arrowstyle="->", color="#555555", lw=2))
        else:
            ax.annotate("", xy=(x + dx, dy), xytext=(x, 0), arrowprops=dict(arrowstyle="->", color="#55a868", lw=2))
            ax.annotate("", xy=(x + cx, cy), xytext=(x, 0), arrowprops=dict(arrowstyle="->", color="#4c72b0", lw=2))
        ax.text(x + 0.3, -2.1, t("embedding") if d == 0 else t("after block {n}").format(n=d - 1), ha="center", fontsize=8.5)
    ax.text(0.0, 0.35, t("one row of the\nembedding table:\nthe same in both"), fontsize=8, va="bottom")
    ax.text(7.2 + 0.9, 1.6, t("“... the sweet juice\nfrom apple”"), fontsize=8.5, color="#55a868", va="center")
    ax.text(7.2 + 0.95, -1.5, t("“... the new software\nfrom apple”"), fontsize=8.5, color="#4c72b0", va="center")
    ax.text(3.6, 2.3, t("the vector of the last token ' apple', block by block"), ha="center", fontsize=10)
    ax.set_xlim(-0.3, 9.6)
    ax.set_ylim(-2.4, 2.6)
    ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
