"""Shared by the figure scripts: write a matplotlib figure as a reproducible SVG."""
from pathlib import Path


def save_svg(fig, out: Path, **savefig_kwargs) -> None:
    """Write `fig` to `out` (folders made as needed), and the same figure as a PNG beside it.

    No timestamp and fixed element ids, so reruns give the same files. The notebooks carry the PNG
    (scripts/sync_notebooks.py): Colab shows neither SVG images nor cell attachments in markdown.
    """
    import matplotlib

    out.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"svg.hashsalt": "llmlab-figures"}):   # else ids are salted at random
        fig.savefig(out, format="svg", metadata={"Date": None}, **savefig_kwargs)
    fig.savefig(out.with_suffix(".png"), format="png", dpi=150, metadata={"Software": None}, **savefig_kwargs)
    print(f"wrote {out} and its .png")
