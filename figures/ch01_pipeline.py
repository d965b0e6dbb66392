"""Chapter 1 diagram: text -> tokenizer -> embedding -> N blocks -> final norm -> LM head -> probabilities,
with the tensor shape written on every arrow. Run from the repository root;
writes figures/generated/ch01_pipeline.svg and, in Chinese, ch01_pipeline.zh_CN.svg."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch
from _svg import (LANGUAGES, check_text_fits, mono, translator, use_language,  # noqa: E402  (figures/_svg.py)
                  write_figure)

OUT = Path("figures/generated/ch01_pipeline.svg")
ZH = {
    "text": "文本", '"The capital\nof France is"': '"The capital\nof France is"', "tokenizer": "分词器",
    "text → ids": "文本 → id", "embedding": "嵌入", "id → row of\na (V, d) table": "id → (V, d) 表\n中的一行",
    "block 0 … N−1": "第 0 … N−1 块", "attention + FFN\n(mix, then think)": "注意力 + 前馈网络\n（先混合，再思考）",
    "final norm": "最终归一化", "RMSNorm": "RMSNorm", "LM head": "语言模型头", "(d → V) matrix": "(d → V) 矩阵",
    "softmax": "softmax", "scores →\nprobabilities": "分数 →\n概率",
    "str": "str", "(1, T)\nints": "(1, T)\n整数", "(1, T, d)": "(1, T, d)", "(1, T, V)\nlogits": "(1, T, V)\nlogits",
}

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


ROW = 4            # boxes in the first row; the rest return right to left below, so each box stays large


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"  # keep text as text in the SVG
    fig, ax = plt.subplots(figsize=(9.6, 4.4))
    width, gap, height, drop = 2.0, 0.62, 1.25, 2.15
    places = [(i * (width + gap), drop) for i in range(ROW)]
    places += [((ROW - 1 - k) * (width + gap), 0.0) for k in range(len(STAGES) - ROW)]
    boxes, labels = [], []
    for (x, y), (name, sub, colour) in zip(places, STAGES):
        boxes.append(ax.add_patch(FancyBboxPatch((x, y), width, height, boxstyle="round,pad=0.03,rounding_size=0.12",
                                                 facecolor=colour, edgecolor="#555555", linewidth=1.2)))
        labels.append([ax.text(x + width / 2, y + height * 0.72, t(name), ha="center", va="center", fontsize=12.5,
                               fontweight="bold"),
                       ax.text(x + width / 2, y + height * 0.32, t(sub), ha="center", va="center", fontsize=11,
                               color="#333333")])
    for i, shape in enumerate(SHAPES):
        (xa, ya), (xb, yb) = places[i], places[i + 1]
        if ya == yb:                       # along a row: right in the first, left in the second
            right = xb > xa
            x0 = xa + width + 0.04 if right else xa - 0.04
            x1 = xb - 0.04 if right else xb + width + 0.04
            y_mid = ya + height / 2
            ax.annotate("", xy=(x1, y_mid), xytext=(x0, y_mid),
                        arrowprops=dict(arrowstyle="->", color="#333333", lw=1.6))
            ax.text((x0 + x1) / 2, ya + height + 0.08, t(shape), ha="center", va="bottom", fontsize=11.5,
                    family=mono(language), color="#1f4e99")
        else:                              # down from the end of the first row
            x_mid = xa + width / 2
            ax.annotate("", xy=(x_mid, yb + height + 0.04), xytext=(x_mid, ya - 0.04),
                        arrowprops=dict(arrowstyle="->", color="#333333", lw=1.6))
            ax.text(x_mid + 0.12, (ya + yb + height) / 2, t(shape), ha="left", va="center", fontsize=11.5,
                    family=mono(language), color="#1f4e99")
    total = ROW * (width + gap) - gap
    ax.set_xlim(-0.1, total + 0.1)
    ax.set_ylim(-0.15, drop + height + 0.75)
    ax.axis("off")
    check_text_fits(fig, boxes, labels, OUT.stem)
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
