"""The live table as lines of styled text, fitted to a width: what ``topo run`` and
``topo attach`` redraw (``view.TableView``, through rich) and ``topo status`` prints
once (plain or with ANSI colours: it does not import rich).

The title (``program — backend``, the stop's and a limiter's progress), a header, a
rule, one row per node (or per group, ``view_rows``) in the columns ``view_layout``
fits to the width, and the run directory. The executable column is shown only where
it says something the node column does not (an executable named other than its node),
or with ``wide``. No line reaches the last column of a terminal: the terminal's ``^C``
echo would wrap it and the next redraw would leave a stale line behind.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from topo.cli.cells import cell_len, cut, pad
from topo.cli.colours import colour
from topo.cli.view_figures import LINE_FIGURES, TABLE_FIGURES, compact, figures, fit, narrowest
from topo.cli.view_layout import COLUMNS, GAP, LAST, METRICS, layout, total_width
from topo.cli.view_rows import STILL_UP, clock, limiter_text, table_rows
from topo.cli.view_source import RunSource

Span = tuple[str, str]  # (text, style): a rich style name such as "bold red", or ""
Line = list[Span]
CHROME_LINES = 7  # the table's title, header, rule and run directory, and a little room
TITLE_STYLE = "italic"
HEADER_STYLE = "bold"


@dataclass(frozen=True)
class Shape:
    """How much room the table has: ``width`` cells (None: no limit, whole rows),
    ``height`` rows (None: every node, no group collapsed); ``wide``: every column and
    more figures, nothing cut (``topo status --wide``)."""

    width: int | None
    height: int | None
    wide: bool = False


def title(source: RunSource, now: float) -> str:
    """``program — backend``, then the stop's progress and a limiter's."""
    parts = [f"{source.program_name} — {source.backend_name}"]
    if source.generation:
        parts.append(f"gen {source.generation}")
    still_up = any(st.state in STILL_UP for st in list(source.nodes.values()))
    if source.stopping_since is not None and still_up:
        parts.append(f"stopping {clock(now - source.stopping_since)}/{clock(source.grace_s)}")
    limiter = source.limiter
    if limiter is not None:
        parts.append(limiter_text(limiter))
    return " · ".join(parts)


def table_lines(source: RunSource, shape: Shape, now: float | None = None) -> list[Line]:
    """The table as lines of spans (see the module docstring)."""
    now = time.time() if now is None else now
    nodes = list(source.nodes.values())
    limit = LINE_FIGURES if shape.wide else TABLE_FIGURES
    found = {st.id: figures(st.metrics, limit) for st in nodes if st.metrics}
    rows = table_rows(source, None if shape.wide else shape.height, found, now)
    wants = {c: cell_len(c) for c in COLUMNS}
    if not any(found.values()):
        del wants[METRICS]
    if not shape.wide and all(st.exe == st.id for st in nodes):
        del wants["executable"]  # every executable is named as its node
    for row in rows:
        for column in wants:
            wants[column] = max(wants[column], cell_len(row.cell(column)))
    least = {METRICS: max((narrowest(list(r.figures)) for r in rows), default=0)}
    enough = {METRICS: max((compact(list(r.figures)) for r in rows), default=0)}
    room = None if shape.width is None or shape.wide else max(shape.width - 1, 20)
    widths = layout(wants, room, least, enough)
    metrics = {}
    if METRICS in widths:
        metrics = {id(r): fit(list(r.figures), widths[METRICS]) for r in rows}
        used = max([cell_len(METRICS), *(cell_len(m) for m in metrics.values())])
        if LAST in widths and used < widths[METRICS]:  # what the figures left: the last line
            widths[LAST] += widths[METRICS] - used
            widths[METRICS] = used
    lines: list[Line] = [[(_fitted(title(source, now), room), TITLE_STYLE)]]
    lines.append(_cells([(c, HEADER_STYLE) for c in widths], list(widths.values())))
    lines.append([("─" * total_width(widths), "")])
    for row in rows:
        texts = {c: metrics.get(id(row), "") if c == METRICS else row.cell(c) for c in widths}
        styles = {
            "node": colour(row.key) if row.key else "dim",
            "state": row.state_style,
            METRICS: "dim",
        }
        spans = [(texts[c], styles.get(c, "")) for c in widths]
        lines.append(_cells(spans, list(widths.values())))
    where = str(source.run_dir)
    lines.append([(where if room is None else cut(where, max(room - 3, 8)), "")])
    return lines


def _fitted(text: str, width: int | None) -> str:
    return text if width is None else cut(text, width)


def _cells(spans: list[Span], widths: list[int]) -> Line:
    """One row: each cell padded (or cut) to its width, ``GAP`` spaces between cells,
    no trailing spaces."""
    line: Line = []
    for i, ((text, style), width) in enumerate(zip(spans, widths, strict=True)):
        if i:
            line.append((" " * GAP, ""))
        line.append((pad(text, width), style))
    while line and not line[-1][0].strip():
        line.pop()
    if line:
        text, style = line[-1]
        line[-1] = (text.rstrip(), style)
    return line


def plain(line: Line) -> str:
    """A line's text without styles."""
    return "".join(text for text, _ in line)
