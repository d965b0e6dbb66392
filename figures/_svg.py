"""Shared by the figure scripts: write a matplotlib figure as a reproducible SVG."""
from pathlib import Path


def save_svg(fig, out: Path, **savefig_kwargs) -> None:
    """Write `fig` to `out` (folders made as needed); no timestamp and fixed element ids, so reruns give
    the same file (the notebooks carry these bytes: scripts/sync_notebooks.py)."""
    import matplotlib

    out.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"svg.hashsalt": "llmlab-figures"}):   # else ids are salted at random
        fig.savefig(out, format="svg", metadata={"Date": None}, **savefig_kwargs)
    print(f"wrote {out}")
