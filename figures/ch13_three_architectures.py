"""Chapter 13 diagram: the three ways to wire a Transformer.

encoder-only (BERT): a bidirectional stack reads the whole input, a head fills in masked tokens;
decoder-only (GPT, Llama, Gemma): a causal stack predicts the next token;
encoder-decoder (2017, T5): the decoder's cross-attention reads the encoder's output.

Run from the repository root: python figures/ch13_three_architectures.py
writes figures/generated/ch13_three_architectures.svg
and, in Chinese, ch13_three_architectures.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch13_three_architectures.svg")
ZH = {
    "encoder-only (BERT)": "仅编码器（BERT）", "the [MASK] sat": "the [MASK] sat", "encoder blocks × L": "编码器块 × L",
    "self-attention:\nevery token sees all": "自注意力：\n每个词元看到全部", "MLM head": "MLM 头",
    "predict the masked": "预测被掩码的词元", '"cat"': '"cat"', "decoder-only (GPT, Llama, Gemma)": "仅解码器（GPT、Llama、Gemma）",
    "the cat sat": "the cat sat", "decoder blocks × L": "解码器块 × L", "causal self-attention:\nonly the past": "因果自注意力：\n只看过去",
    "LM head": "语言模型头", "next token": "下一个词元", '"on"': '"on"',
    "encoder-decoder (2017 Transformer, T5)": "编码器-解码器（2017 年的 Transformer、T5）",
    "source: I love tea": "源句：“I love tea”", "encoder blocks × L_enc": "编码器块 × L_enc",
    "bidirectional\nself-attention": "双向\n自注意力", "target so far: 我 爱": "目前的目标句：我 爱",
    "decoder blocks × L_dec": "解码器块 × L_dec", "causal self-attention\n+ cross-attention\n+ FFN": "因果自注意力\n+ 交叉注意力\n+ 前馈网络",
    '"茶"': '"茶"', "memory:\nkeys, values": "记忆：\n键、值", "queries come\nfrom the decoder": "查询来自\n解码器",
}
ENC, DEC, HEAD, IO = "#b9e3c6", "#c6dbf7", "#f7c6d0", "#eeeeee"


def box(ax, x, y, w, h, title, sub, colour, t):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=colour, edgecolor="#555555", linewidth=1.1))
    ax.text(x + w / 2, y + h * (0.64 if sub else 0.5), t(title), ha="center", va="center", fontsize=10,
            fontweight="bold")
    if sub:
        ax.text(x + w / 2, y + h * 0.28, t(sub), ha="center", va="center", fontsize=8.5, color="#333333")


def arrow(ax, x0, y0, x1, y1, colour="#333333", text=None):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="->", color=colour, lw=1.4))
    if text:
        ax.text((x0 + x1) / 2 + 0.05, (y0 + y1) / 2, text, fontsize=8.5, color=colour, ha="left", va="center")


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"  # keep text as text in the SVG
    plt.rcParams["font.family"] = ["DejaVu Sans", "Noto Sans CJK SC"]  # CJK fallback for the Chinese labels
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), gridspec_kw={"width_ratios": [1, 1, 2.5]})
    w, h = 2.5, 0.9

    ax = axes[0]
    ax.set_title(t("encoder-only (BERT)"), fontsize=11)
    box(ax, 0.25, 0.2, w, 0.6, "the [MASK] sat", "", IO, t)
    box(ax, 0.25, 1.3, w, h, "encoder blocks × L", "self-attention:\nevery token sees all", ENC, t)
    box(ax, 0.25, 2.7, w, 0.7, "MLM head", "predict the masked", HEAD, t)
    box(ax, 0.25, 3.8, w, 0.5, '"cat"', "", IO, t)
    arrow(ax, 1.5, 0.8, 1.5, 1.3)
    arrow(ax, 1.5, 2.2, 1.5, 2.7)
    arrow(ax, 1.5, 3.4, 1.5, 3.8)

    ax = axes[1]
    ax.set_title(t("decoder-only (GPT, Llama, Gemma)"), fontsize=11)
    box(ax, 0.25, 0.2, w, 0.6, "the cat sat", "", IO, t)
    box(ax, 0.25, 1.3, w, h, "decoder blocks × L", "causal self-attention:\nonly the past", DEC, t)
    box(ax, 0.25, 2.7, w, 0.7, "LM head", "next token", HEAD, t)
    box(ax, 0.25, 3.8, w, 0.5, '"on"', "", IO, t)
    arrow(ax, 1.5, 0.8, 1.5, 1.3)
    arrow(ax, 1.5, 2.2, 1.5, 2.7)
    arrow(ax, 1.5, 3.4, 1.5, 3.8)

    ax = axes[2]
    ax.set_title(t("encoder-decoder (2017 Transformer, T5)"), fontsize=11)
    w3, xd = 3.1, 4.8                         # wider boxes: the labels name two layer counts
    box(ax, 0.0, 0.2, w3, 0.6, "source: I love tea", "", IO, t)
    box(ax, 0.0, 1.3, w3, h, "encoder blocks × L_enc", "bidirectional\nself-attention", ENC, t)
    box(ax, xd, 0.2, w3, 0.6, "target so far: 我 爱", "", IO, t)
    box(ax, xd, 1.3, w3, 1.3, "decoder blocks × L_dec", "causal self-attention\n+ cross-attention\n+ FFN", DEC, t)
    box(ax, xd, 3.0, w3, 0.6, "LM head", "", HEAD, t)
    box(ax, xd, 3.9, w3, 0.45, '"茶"', "", IO, t)
    arrow(ax, w3 / 2, 0.8, w3 / 2, 1.3)
    arrow(ax, xd + w3 / 2, 0.8, xd + w3 / 2, 1.3)
    arrow(ax, w3, 1.75, xd, 1.75, colour="#c44e52")
    middle = (w3 + xd) / 2
    ax.text(middle, 1.85, t("memory:\nkeys, values"), fontsize=8.5, color="#c44e52", ha="center", va="bottom")
    ax.text(middle, 1.62, t("queries come\nfrom the decoder"), fontsize=8, color="#555555", ha="center", va="top")
    arrow(ax, xd + w3 / 2, 2.6, xd + w3 / 2, 3.0)
    arrow(ax, xd + w3 / 2, 3.6, xd + w3 / 2, 3.9)

    for ax, width in zip(axes, [3.0, 3.0, 8.0]):
        ax.set_xlim(-0.1, width)
        ax.set_ylim(0, 4.5)
        ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
