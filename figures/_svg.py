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


def check_text_fits(fig, boxes, labels, figure: str, margin_px: float = 4.0) -> None:
    """Refuse to write a figure whose text runs over the edge of its box (boxes[i] holds the texts labels[i])."""
    renderer = fig.canvas.get_renderer()
    for box, texts in zip(boxes, labels):
        frame = box.get_window_extent(renderer)
        for text in texts:
            extent = text.get_window_extent(renderer)
            if extent.x0 < frame.x0 + margin_px or extent.x1 > frame.x1 - margin_px:
                raise SystemExit(f"{figure}: the text {text.get_text()!r} is wider than its box; "
                                 "widen the boxes or shorten the text")
