"""How an inspection result shows itself: a text table in a terminal, an HTML table in a notebook.

The results that are a grid (the logit lens, a causal trace, a direct logit attribution) have the
same shape on screen: one row per place in the model ("embed", "block 0", "block 1", ...), one
column per input token, so they share these two functions.

    >>> print(text_table("block", ["'The'", "' cat'"], [("embed", ["'a' 0.50", "'b' 0.25"]), ("block 0", ["c", "d"])]))
      block     'The'    ' cat'
      embed  'a' 0.50  'b' 0.25
    block 0         c         d

Tokens are written as Python writes strings (' cat'), so a leading space or a newline is visible
(the views of llmlab.visualization draw them as "␣cat"). Brief tables keep the last columns and the first and last rows only:
that is what `repr(result)` prints, short enough for a REPL; `str(result)` prints them all.
"""
from __future__ import annotations

import html


def _brief(columns: list, rows: list, max_columns: int | None, max_rows: int | None):
    """Keep the last max_columns columns and the first and last rows; "…" marks what was left out."""
    if max_columns is not None and len(columns) > max_columns:
        columns = ["…"] + list(columns[-max_columns:])
        rows = [(label, ["…"] + list(cells[-max_columns:])) for label, cells in rows]
    if max_rows is not None and len(rows) > max_rows:
        head = max_rows // 2
        rows = rows[:head] + [("⋮", [""] * len(columns))] + rows[-(max_rows - head):]
    return columns, rows


def text_table(corner: str, columns: list[str], rows: list[tuple[str, list[str]]], max_columns: int | None = None,
               max_rows: int | None = None) -> str:
    """Right-aligned text table: a header row (corner, then the column labels), then one line per
    (label, cells) row. max_columns / max_rows: keep only the last columns and the first and last rows."""
    columns, rows = _brief(columns, rows, max_columns, max_rows)
    first = max([len(corner)] + [len(label) for label, _ in rows])
    widths = [max([len(c)] + [len(cells[i]) for _, cells in rows]) for i, c in enumerate(columns)]
    lines = ["  ".join([f"{corner:>{first}}"] + [f"{c:>{w}}" for c, w in zip(columns, widths)])]
    lines += ["  ".join([f"{label:>{first}}"] + [f"{c:>{w}}" for c, w in zip(cells, widths)]) for label, cells in rows]
    return "\n".join(line.rstrip() for line in lines)


def html_table(corner: str, columns: list[str], rows: list[tuple[str, list[str]]], shades=None,
               caption: str | None = None) -> str:
    """An HTML <table>: a header row of column labels, then one row per (label, cells).

    shades: one number in 0..1 per cell (same layout as the cells), drawn as a blue background.
    """
    cells_css = "padding:2px 6px;text-align:right;font-family:monospace;white-space:pre"   # one rule for every cell
    parts = [f"<style>table.llmlab-result td, table.llmlab-result th {{{cells_css}}}</style>",
             '<table class="llmlab-result" style="border-collapse:collapse;font-size:0.85em">']
    if caption:
        parts.append(f'<caption style="text-align:left;caption-side:top">{html.escape(caption)}</caption>')
    parts.append("<thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in [corner, *columns]) + "</tr></thead>")
    parts.append("<tbody>")
    for r, (label, cells) in enumerate(rows):
        tds = []
        for c, cell in enumerate(cells):
            shade = 0.0 if shades is None else min(max(float(shades[r][c]), 0.0), 1.0)
            style = f' style="background:rgba(33,102,172,{0.6 * shade:.2f})"' if shade > 0 else ""
            tds.append(f"<td{style}>{html.escape(cell)}</td>")
        parts.append(f"<tr><th>{html.escape(label)}</th>{''.join(tds)}</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


class TableResult:
    """What a result that is a table inherits: `result` in a REPL prints a short table, `print(result)`
    all of it, and a notebook draws it as HTML. A subclass gives _title() -> str and
    _table() -> (corner, column labels, [(row label, cells)], shades or None).

    Its dataclass needs repr=False, or the dataclass writes its own __repr__ (every tensor in full).
    """

    brief_columns = 6   # what repr() keeps: the last columns (the last token is where the answer is) ...
    brief_rows = 12     # ... and the first and last rows

    def _title(self) -> str:
        raise NotImplementedError

    def _table(self):
        raise NotImplementedError

    def __str__(self) -> str:
        corner, columns, rows, _ = self._table()
        return self._title() + "\n" + text_table(corner, columns, rows)

    def __repr__(self) -> str:
        corner, columns, rows, _ = self._table()
        text = self._title() + "\n" + text_table(corner, columns, rows, self.brief_columns, self.brief_rows)
        if len(columns) > self.brief_columns or len(rows) > self.brief_rows:
            text += f"\n(print() shows all {len(rows)} rows and {len(columns)} columns)"
        return text

    def _repr_html_(self) -> str:
        corner, columns, rows, shades = self._table()
        return html_table(corner, columns, rows, shades, caption=self._title())
