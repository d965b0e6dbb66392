"""Chapter 5 diagram: the idea of attention in one picture. The token "it" asks a question, every
earlier token answers with a score, and "it" takes a weighted mix of what they offer.

Run from the repository root: python figures/ch05_attention_idea.py
writes figures/generated/ch05_attention_idea.svg
and, in Chinese, ch05_attention_idea.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch05_attention_idea.svg")
ZH = {
    "weight = softmax(query of \"it\" · key of each token / √d_k);   new vector of \"it\" = Σ weight × value of that token":
        "权重 = softmax(“it” 的查询 · 每个词元的键 / √d_k)；   “it” 的新向量 = Σ 权重 × 该词元的值",
    "The weights are illustrative: made up to show the idea, not measured on a model.":
        "这些权重只作示意：为说明思路而编造，并非在模型上测得。",
    "query: \"which earlier token\nis the thing I stand for?\"": "查询：“前面哪个词元\n是我指代的东西？”",
}
TOKENS = ["The", "dog", "chased", "the", "squirrel", "because", "it"]
# illustrative weights of the query "it" over the tokens it can see (they sum to 1)
WEIGHTS = [0.04, 0.38, 0.05, 0.03, 0.42, 0.04, 0.04]
TOKEN, QUERY, LINK = "#4c72b0", "#dd8452", "#55a868"


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    assert abs(sum(WEIGHTS) - 1) < 1e-9
    fig, ax = plt.subplots(figsize=(9.5, 3.6))
    xs = [1.3 * i for i in range(len(TOKENS))]
    q = len(TOKENS) - 1
    for i, (x, token) in enumerate(zip(xs, TOKENS)):
        colour = QUERY if i == q else TOKEN
        ax.add_patch(FancyBboxPatch((x - 0.55, -0.3), 1.1, 0.6, boxstyle="round,pad=0.03",
                                    facecolor=colour, edgecolor="none"))
        ax.text(x, 0, token, ha="center", va="center", color="white", fontsize=10, fontweight="bold")
        if i == q:
            continue
        w = WEIGHTS[i]
        # an arc from "it" back to token i; its width is the attention weight
        ax.annotate("", xy=(x, 0.32), xytext=(xs[q], 0.32),
                    arrowprops=dict(arrowstyle="-|>", color=LINK, lw=0.6 + 9 * w, alpha=0.35 + 0.65 * w,
                                    connectionstyle=f"arc3,rad={0.25 + 0.03 * (q - i)}"))
        ax.text(x, -0.55, f"{w:.2f}", ha="center", fontsize=9, color="#333333")  # illustrative weight
    ax.text(xs[q], -0.55, f"{WEIGHTS[q]:.2f}", ha="center", fontsize=9, color="#333333")
    ax.text(xs[0] - 0.6, -0.95, t("weight = softmax(query of \"it\" · key of each token / √d_k);   "
                                   "new vector of \"it\" = Σ weight × value of that token"), fontsize=9, color="#444444")
    ax.text(xs[0] - 0.6, -1.3, t("The weights are illustrative: made up to show the idea, not measured on a model."),
            fontsize=9, color="#aa3333", style="italic")
    ax.text(xs[q] + 0.6, 0.55, t("query: \"which earlier token\nis the thing I stand for?\""),
            fontsize=9, color=QUERY, ha="left", va="bottom")
    ax.set_xlim(xs[0] - 0.7, xs[-1] + 2.6)
    ax.set_ylim(-1.45, 2.6)
    ax.axis("off")
    fig.tight_layout()
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
