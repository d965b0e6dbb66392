"""Shared by the figure scripts: write a matplotlib figure as a reproducible SVG."""
from pathlib import Path


def save_svg(fig, out: Path, **savefig_kwargs) -> None:
    """Write `fig` to `out` (folders made as needed); no timestamp, so reruns give the same file."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="svg", metadata={"Date": None}, **savefig_kwargs)
    print(f"wrote {out}")
