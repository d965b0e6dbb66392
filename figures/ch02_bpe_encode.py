"""Chapter 2 diagram: encoding with learned merges, earliest-learned merge first, next to the
tempting mistake of merging the leftmost mergeable pair first. Run from the repository root;
writes figures/generated/ch02_bpe_encode.svg and, in Chinese, ch02_bpe_encode.zh_CN.svg."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch
from _svg import LANGUAGES, mono, translator, use_language, write_figure  # noqa: E402  (figures/_svg.py)

OUT = Path("figures/generated/ch02_bpe_encode.svg")
ZH = {
    "BPE: earliest-learned merge first": "BPE：最早学到的合并规则优先",
    "wrong: leftmost pair first": "错误做法：最左边的词对优先",
    "no pair has a merge: done": "没有可合并的词对：结束",
    "rank {rank}": "优先级 {rank}",
    "learned merges:  rank 1: b + c → bc    rank 2: a + b → ab":
        "学到的合并规则：  优先级 1: b + c → bc    优先级 2: a + b → ab",
}

# The merges, in the order they were learned: rank 1 was learned first and has priority.
MERGES = [("b", "c", "bc"), ("a", "b", "ab")]
RANK = {(left, right): k + 1 for k, (left, right, _) in enumerate(MERGES)}
NEW = {(left, right): new for left, right, new in MERGES}


def encode(tokens, leftmost):
    """Every state the sequence goes through, and the pair merged to leave it."""
    states = [list(tokens)]
    while True:
        tokens = states[-1]
        spots = [i for i in range(len(tokens) - 1) if (tokens[i], tokens[i + 1]) in RANK]
        if not spots:
            return states
        i = spots[0] if leftmost else min(spots, key=lambda s: RANK[(tokens[s], tokens[s + 1])])
        states.append(tokens[:i] + [NEW[(tokens[i], tokens[i + 1])]] + tokens[i + 2:])


def draw_column(ax, x0, title, states, leftmost, colour, t):
    ax.text(x0 + 1.6, 3.55, title, ha="center", va="bottom", fontsize=11, fontweight="bold", color=colour)
    for row, tokens in enumerate(states):
        y = 2.6 - row * 1.25
        for k, token in enumerate(tokens):
            ax.add_patch(FancyBboxPatch((x0 + k * 1.1, y), 0.9, 0.55, boxstyle="round,pad=0.02,rounding_size=0.08",
                                        facecolor="#fde2a7" if len(token) > 1 else "#eeeeee",
                                        edgecolor="#555555", linewidth=1.0))
            ax.text(x0 + k * 1.1 + 0.45, y + 0.27, token, ha="center", va="center", fontsize=12, family="monospace")
        # the candidate pairs of this state, with the rank of their merge
        spots = [i for i in range(len(tokens) - 1) if (tokens[i], tokens[i + 1]) in RANK]
        if not spots:
            ax.text(x0 + len(tokens) * 1.1 + 0.1, y + 0.27, t("no pair has a merge: done"), va="center",
                    fontsize=9, color="#333333")
            continue
        chosen = spots[0] if leftmost else min(spots, key=lambda s: RANK[(tokens[s], tokens[s + 1])])
        for i in spots:
            rank = RANK[(tokens[i], tokens[i + 1])]
            xm = x0 + i * 1.1 + 1.0
            ax.text(xm, y - 0.18, t("rank {rank}").format(rank=rank), ha="center", va="top", fontsize=9,
                    color=colour if i == chosen else "#888888", fontweight="bold" if i == chosen else None)
        ax.annotate("", xy=(x0 + chosen * 1.1 + 1.0, y - 0.72), xytext=(x0 + chosen * 1.1 + 1.0, y - 0.45),
                    arrowprops=dict(arrowstyle="->", color=colour, lw=1.3))


def draw(language: str):
    """The figure, every text in `language`."""
    t = translator(ZH, language, OUT.stem)
    use_language(language)
    plt.rcParams["svg.fonttype"] = "none"  # keep text as text in the SVG
    fig, ax = plt.subplots(figsize=(9, 3.6))
    start = ["a", "b", "c"]
    draw_column(ax, 0.0, t("BPE: earliest-learned merge first"), encode(start, leftmost=False), False, "#1f6e2a", t)
    draw_column(ax, 5.2, t("wrong: leftmost pair first"), encode(start, leftmost=True), True, "#b22222", t)
    ax.text(4.6, -0.55, t("learned merges:  rank 1: b + c → bc    rank 2: a + b → ab"), ha="center", fontsize=10,
            family=mono(language), color="#333333")
    ax.set_xlim(-0.2, 9.8)
    ax.set_ylim(-0.8, 4.0)
    ax.axis("off")
    return fig


def main(language: str = "en", folder: Path = OUT.parent) -> None:
    """Draw the figure in `language` and write it (SVG and PNG) into `folder`."""
    write_figure(draw, OUT, language, folder, bbox_inches="tight")


if __name__ == "__main__":
    for language in LANGUAGES:
        main(language)
