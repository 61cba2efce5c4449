"""The lines of a log in a run directory.

Every line a node writes through Python's ``sys.stdout``/``sys.stderr`` starts with a
local timestamp (``2026-11-30T07:40:01.123 ``); output written below Python (C
libraries, ``os.write(1, ...)``) is kept as it is. The launcher writes a marker line
when an attempt starts and when it ends (``MARKER``), which the live view and ``topo
logs`` do not show.
"""

from __future__ import annotations

import re
from datetime import datetime

MARKER = "── topo: "
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}) ")


def timestamp() -> str:
    """Local time as ISO 8601 with milliseconds: ``2026-11-30T07:40:01.123``."""
    return datetime.now().isoformat(timespec="milliseconds")


def marker_line(text: str) -> str:
    """``<timestamp> ── topo: <text> ──`` and its newline."""
    return f"{timestamp()} {MARKER}{text} ──\n"


def bare(line: str) -> str:
    """A line without its timestamp."""
    return STAMP.sub("", line, count=1)


def display_line(line: str, stamp: bool = False) -> str | None:
    """A log line as it is shown: without its timestamp (unless ``stamp``); None for a
    marker line."""
    shown = bare(line)
    if shown.startswith(MARKER):
        return None
    return line if stamp else shown
