"""What the static views share: a check that turns input into a numpy array of the right rank, and
the plain HTML table with its colour legend that a view shows before its script runs (and that the
live widgets display)."""
from __future__ import annotations

import numpy as np

from llmlab.visualization.html import escape, text_colour


def as_array(x, name: str, ndim: tuple[int, ...]) -> np.ndarray:
    """A tensor, array or nested list as a float64 array with one of the ranks in `ndim`.

    >>> as_array([[1, 2], [3, 4]], "matrix", (2,)).shape
    (2, 2)
    """
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    x = np.asarray(x, dtype=np.float64)
    if x.ndim not in ndim:
        raise ValueError(f"{name} should have {' or '.join(map(str, ndim))} dimensions, got shape {tuple(x.shape)}.")
    return x


def grid_html(rows: list[str], cols: list[str], cell, corner: str = "") -> str:
    """An HTML table in a scroll box (sticky headers, as the scripts draw it); cell(i, j) -> (text, background,
    alpha, tooltip)."""
    head = (f'<tr><th class="llmlab-corner">{escape(corner)}</th>'
            + "".join(f'<th class="llmlab-col"><span class="llmlab-col-text">{escape(c)}</span></th>' for c in cols)
            + "</tr>")
    body = []
    for i, row in enumerate(rows):
        tds = []
        for j in range(len(cols)):
            text, background, alpha, tooltip = cell(i, j)
            tds.append(f'<td class="llmlab-cell" style="background:{background};color:{text_colour(alpha)}" '
                       f'title="{escape(tooltip)}" aria-label="{escape(tooltip)}">{escape(text)}</td>')
        body.append(f'<tr><th class="llmlab-row">{escape(row)}</th>{"".join(tds)}</tr>')
    return (f'<div class="llmlab-scroll"><table class="llmlab-grid"><thead>{head}</thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def legend_html(label: str, vmin: float = 0.0, vmax: float = 1.0, diverging: bool = False) -> str:
    """The colour scale of a static table, as the scripts draw it."""
    ramp = ("linear-gradient(to right, rgba(214,39,40,1), rgba(214,39,40,0) 50%, rgba(31,119,180,0) 50%, "
            "rgba(31,119,180,1))" if diverging else "linear-gradient(to right, rgba(31,119,180,0), rgba(31,119,180,1))")
    return (f'<div class="llmlab-legend"><span class="llmlab-legend-text">{escape(label)}</span>'
            f'<span class="llmlab-legend-min">{vmin:g}</span><span class="llmlab-ramp" style="background:{ramp}"></span>'
            f'<span class="llmlab-legend-max">{vmax:g}</span></div>')
