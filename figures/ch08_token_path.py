"""Chapter 8 diagram: the five tokens of "The capital of France is" through the whole stack of SmolLM2, with
shapes; the last one, " is", highlighted from its token id to the prediction (" Paris", the top token in the run).

Run from the repository root: python figures/ch08_token_path.py
writes figures/generated/ch08_token_path.svg
and, in Chinese, ch08_token_path.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch08_token_path.svg")
ZH = {
    "embedding\nrow (576,)": "嵌入\n行 (576,)", "attn + FFN\n(576,)": "注意力 + 前馈\n(576,)",
    "final RMSNorm\n(576,)": "最终 RMSNorm\n(576,)",
    "LM head: 49,152 logits\nsoftmax → ' Paris'": "语言模型头：49,152 个 logit\nsoftmax → ' Paris'",
    "token id: one integer per position": "词元 id：每个位置一个整数",
    "look up one row of the (49,152 × 576) table": "在 (49,152 × 576) 的表中查出一行",
    "block 0: x += attn(norm(x)), the only step that reads earlier positions\n(orange: their streams as they enter the block);\nthen x += FFN(norm(x)), this position alone":
        "第 0 块：x += attn(norm(x))，唯一读取前面位置的一步\n（橙色：读取它们进入该块时的流）；\n然后 x += FFN(norm(x))，只处理本位置",
    "block 29, the last of 30: the same two steps, same shapes,\n(576,) in, (576,) out":
        "第 29 块（30 块中的最后一块）：同样的两步，同样的形状，\n输入 (576,)，输出 (576,)",
    "the next token is read from the LAST position only": "下一个词元只从最后一个位置读出",
    "dot product with every row of the (tied) embedding table": "与（权重绑定的）嵌入表的每一行做点积",
}
TOKENS = ["The", " capital", " of", " France", " is"]
STREAM, OTHER, ATTN, FFN, HEAD = "#4c72b0", "#c8c8c8", "#dd8452", "#55a868", "#8172b2"


def box(ax, x, y, text, colour, w, h, fontsize=8.5, text_colour="white"):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02", facecolor=colour,
                                edgecolor="none"))
    ax.text(x, y, text, ha="center", va="center", color=text_colour, fontsize=fontsize, fontweight="bold")


def arrow(ax, x0, y0, x1, y1, colour="#555555", lw=1.1):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="-|>", color=colour, lw=lw))


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, ax = plt.subplots(figsize=(10, 5.8))
    xs = [0.8 + 1.3 * i for i in range(len(TOKENS))]
    rows = {"token": 0.0, "embed": 1.0, "b0": 2.3, "dots": 3.35, "b29": 4.5, "norm": 5.6, "head": 6.5}
    for i, (x, token) in enumerate(zip(xs, TOKENS)):
        last = i == len(TOKENS) - 1
        colour = STREAM if last else OTHER
        tc = "white" if last else "#333333"
        box(ax, x, rows["token"], repr(token), colour, 1.1, 0.45, text_colour=tc)
        box(ax, x, rows["embed"], t("embedding\nrow (576,)"), colour, 1.1, 0.55, fontsize=7.5, text_colour=tc)
        arrow(ax, x, rows["token"] + 0.25, x, rows["embed"] - 0.3)
        for key in ("b0", "b29"):
            box(ax, x, rows[key], t("attn + FFN\n(576,)"), colour, 1.1, 0.6, fontsize=7.5, text_colour=tc)
        ax.text(x, rows["dots"], "⋮", ha="center", va="center", fontsize=16, color="#555555")
        arrow(ax, x, rows["embed"] + 0.3, x, rows["b0"] - 0.32)
        arrow(ax, x, rows["b0"] + 0.32, x, rows["dots"] - 0.25)
        arrow(ax, x, rows["dots"] + 0.25, x, rows["b29"] - 0.32)
        if not last:
            # attention in the last position reads this stream as it enters the block: from the dot on its
            # arrow, along a lane of its own, up into the last position's block
            for key in ("b0", "b29"):
                y_lane, x_end = rows[key] - 0.78 + 0.1 * i, xs[-1] - 0.15 - 0.1 * i
                ax.plot([x, x_end], [y_lane, y_lane], color=ATTN, lw=1.0)
                ax.plot([x], [y_lane], "o", color=ATTN, markersize=4)
                arrow(ax, x_end, y_lane, x_end, rows[key] - 0.32, colour=ATTN, lw=1.0)
    xl = xs[-1]
    box(ax, xl, rows["norm"], t("final RMSNorm\n(576,)"), STREAM, 1.7, 0.55, fontsize=7.5)
    arrow(ax, xl, rows["b29"] + 0.32, xl, rows["norm"] - 0.3)
    box(ax, xl, rows["head"], t("LM head: 49,152 logits\nsoftmax → ' Paris'"), HEAD, 2.7, 0.6, fontsize=7.5)
    arrow(ax, xl, rows["norm"] + 0.3, xl, rows["head"] - 0.32)
    notes = [
        (rows["token"], "token id: one integer per position"),
        (rows["embed"], "look up one row of the (49,152 × 576) table"),
        (rows["b0"], "block 0: x += attn(norm(x)), the only step that reads earlier positions\n"
                     "(orange: their streams as they enter the block);\nthen x += FFN(norm(x)), this position alone"),
        (rows["b29"], "block 29, the last of 30: the same two steps, same shapes,\n(576,) in, (576,) out"),
        (rows["norm"], "the next token is read from the LAST position only"),
        (rows["head"], "dot product with every row of the (tied) embedding table"),
    ]
    for y, text in notes:
        ax.text(7.5, y, t(text), fontsize=8.5, va="center", color="#333333")
    ax.set_xlim(0.0, 13.2)
    ax.set_ylim(-0.4, 6.95)
    ax.axis("off")
    fig.tight_layout()
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
