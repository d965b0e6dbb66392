"""Chapter 10 diagram: prefill runs the prompt in one pass and fills the KV cache; each decode
step runs one new token, appends its key and value, and attends to everything cached.

Run from the repository root: python figures/ch10_prefill_decode.py
writes figures/generated/ch10_prefill_decode.svg
and, in Chinese, ch10_prefill_decode.zh_CN.svg
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402
from _svg import LANGUAGES, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch10_prefill_decode.svg")
ZH = {
    "prefill\nthe whole prompt, one pass": "预填充\n整个提示，一次前向", "decode step {step}\none new token": "解码第 {step} 步\n一个新词元",
    "input": "输入", "KV cache": "KV 缓存", "{n} x {n} scores (causal)": "{n} x {n} 分数（因果掩码）",
    "1 x {n} scores, no mask": "1 x {n} 分数，无需掩码", "-> next token: '{token}'": "-> 下一个词元：'{token}'",
}
PROMPT, NEW, CACHE, ACTIVE = "#4c72b0", "#dd8452", "#c8d6e8", "#55a868"
# SmolLM2's own greedy run in chapter 10: the prompt is 4 tokens, and the lesson asserts the next three.
PROMPT_TOKENS = ["The", "cache", "stores", "keys"]
NEW_TOKENS = ["that", "are", "not"]       # fed back in, one per decode step
OUTPUTS = NEW_TOKENS + ["already"]        # what each step predicts


def cell(ax, x, y, colour, text="", w=0.9, h=0.6, text_colour="white"):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=colour, edgecolor="white", lw=1.5))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=7, color=text_colour)


def arrow(ax, start, end):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color="#666666", lw=1))


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    fig, ax = plt.subplots(figsize=(10, 3.6))
    n_prompt = len(PROMPT_TOKENS)
    # Columns: step 0 = prefill, then one column group per decode step.
    steps = [(t("prefill\nthe whole prompt, one pass"), n_prompt)] + [
        (t("decode step {step}\none new token").format(step=i + 1), n_prompt + i + 1) for i in range(len(NEW_TOKENS))]
    x0 = 0.0
    for s, (title, cached_after) in enumerate(steps):
        width = cached_after * 0.95
        ax.text(x0 + width / 2, 3.35, title, ha="center", va="bottom", fontsize=9, fontweight="bold")
        # Row 1: what goes into the model in this step.
        for i in range(cached_after):
            is_input = (s == 0) or (i == cached_after - 1)
            token = (PROMPT_TOKENS + NEW_TOKENS)[i]
            colour = (PROMPT if i < n_prompt else NEW) if is_input else "#eeeeee"
            cell(ax, x0 + i * 0.95, 2.55, colour, token if is_input else "",
                 text_colour="white")
        ax.text(x0 - 0.1, 2.85, t("input") if s == 0 else "", ha="right", va="center", fontsize=8)
        # Row 2: the KV cache after this step (new entries highlighted).
        for i in range(cached_after):
            new_entry = (s == 0) or (i == cached_after - 1)
            cell(ax, x0 + i * 0.95, 1.35, ACTIVE if new_entry else CACHE, "k,v",
                 text_colour="white" if new_entry else "#333333")
        ax.text(x0 - 0.1, 1.65, t("KV cache") if s == 0 else "", ha="right", va="center", fontsize=8)
        for i in range(cached_after):
            is_input = (s == 0) or (i == cached_after - 1)
            if is_input:
                arrow(ax, (x0 + i * 0.95 + 0.45, 2.55), (x0 + i * 0.95 + 0.45, 1.97))
        # Row 3: attention of this step.
        q_label = t("{n} x {n} scores (causal)" if s == 0 else "1 x {n} scores, no mask").format(n=cached_after)
        ax.text(x0 + width / 2, 0.95, q_label, ha="center", fontsize=8, color="#333333")
        ax.text(x0 + width / 2, 0.45, t("-> next token: '{token}'").format(token=OUTPUTS[s]), ha="center", fontsize=8, color=NEW)
        x0 += width + 0.8
    ax.set_xlim(-1.2, x0)
    ax.set_ylim(0.2, 4.0)
    ax.axis("off")
    fig.tight_layout()
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder)


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
