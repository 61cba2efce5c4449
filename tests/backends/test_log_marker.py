"""Markers the launcher writes into a node's log start on a line of their own."""

from __future__ import annotations

from pathlib import Path

from topo.backends.logs import write_marker
from topo.rundir.lines import MARKER


def test_a_marker_after_a_line_cut_short_starts_on_a_new_line(tmp_path: Path) -> None:
    log = tmp_path / "learner.log"
    log.write_bytes(b"2026-12-02T13:28:45.001 step 1\n2026-12-02T13:28:")  # killed mid-line
    write_marker(log, "attempt 1 ended (pid 7): killed by SIGKILL")
    lines = log.read_text().splitlines()
    assert lines[:2] == ["2026-12-02T13:28:45.001 step 1", "2026-12-02T13:28:"]
    assert MARKER in lines[2] and lines[2].endswith("killed by SIGKILL ──")
    assert len(lines) == 3


def test_markers_add_no_empty_lines(tmp_path: Path) -> None:
    log = tmp_path / "new.log"
    write_marker(log, "attempt 1 started (pid 7)")  # a file that does not exist yet
    write_marker(log, "attempt 1 ended (pid 7): exit code 0")
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and all(MARKER in line for line in lines)
