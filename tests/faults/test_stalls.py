"""A running node whose progress stops is flagged: a warning line naming it on the
terminal, ``stalled_s`` in status.json, ``stalled`` in the live table; a node that never
reported progress is not; progress coming back clears the mark.

The node code is in this module (``test_stalls:...``; the directory is on ``sys.path``)."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fault_support import topo_run, wait_gone, wait_up
from rich.console import Console

import topo
from topo.testing import Lines, wait_until


def progress_then_pause(resume_file: str = "", rows: int = 10) -> None:
    """A py node: ``rows`` metrics rows 0.1 s apart, then none until ``resume_file``
    exists (never without one), then a row every 0.1 s until the program stops."""
    log = topo.metrics.logger("work")
    stop = topo.stop_event()
    for i in range(rows):
        log.write({"steps": i})
        if stop.wait(0.1):
            return
    while not (resume_file and Path(resume_file).exists()):
        if stop.wait(0.1):
            return
    i = rows
    while not stop.wait(0.1):
        i += 1
        log.write({"steps": i})


def silent() -> None:
    """A py node that never reports progress: it is never flagged."""
    topo.stop_event().wait()


TOPOLOGY = """
    name: stalls
    nodes:
      worker:
        kind: py
        target: "test_stalls:progress_then_pause"
        stall_after_s: 1.5
        args: {{resume_file: "{resume}"}}
      quiet: {{kind: py, target: "test_stalls:silent", stall_after_s: 1.5}}
"""


def _node(run_dir: Path, node: str) -> dict[str, Any]:
    status = json.loads((run_dir / "status.json").read_text())
    return next(n for n in status["nodes"] if n["id"] == node)


@pytest.mark.slow
def test_a_node_that_stops_progressing_is_flagged_on_the_terminal_and_in_status_json(
    topology: Callable[..., Path], tmp_path: Path
) -> None:
    resume = tmp_path / "resume"
    path = topology(TOPOLOGY.format(resume=resume))
    run_dir = tmp_path / "run"
    with topo_run(str(path), "-b", "procs", "--no-live", "--run-dir", str(run_dir)) as proc:
        up = wait_up(proc)
        assert proc.stdout is not None
        lines = Lines(proc.stdout)
        warning = lines.wait_for("stalled", 30)
        assert "worker stalled: no progress for" in warning and "quiet" not in warning
        # status.json is rewritten while the stall goes on
        worker = wait_until(
            lambda: (
                (w := _node(run_dir, "worker"))["stalled_s"] is not None
                and w["stalled_s"] >= 2.0
                and w
            ),
            30,
            what="the stall in status.json",
        )
        quiet = _node(run_dir, "quiet")
        assert worker["state"] == "running" and worker["stalled_s"] >= 2.0
        assert quiet["state"] == "running" and quiet["stalled_s"] is None
        resume.touch()
        back = lines.wait_for("making progress again", 30)
        assert "worker" in back
        wait_until(lambda: _node(run_dir, "worker")["stalled_s"] is None, 30, what="it cleared")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
    status = json.loads((run_dir / "status.json").read_text())
    assert any(w.startswith("node worker stalled: no progress") for w in status["warnings"])
    assert not any("quiet" in w for w in status["warnings"])
    seen = up + lines.seen
    assert "stalled" not in "".join(line for line in seen if line.startswith("quiet"))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["threads"])
def test_the_live_table_marks_a_stalled_node(
    topo_launch: Callable, topology: Callable[..., Path], backend: str
) -> None:
    from topo.cli.view import TableView

    run = topo_launch(topology(TOPOLOGY.format(resume="")), backend)
    wait_until(lambda: run.launcher.state.nodes["worker"].stalled_s is not None, 30)
    console = Console(record=True, width=200, force_terminal=False)
    TableView(run.launcher.state, console).close()
    text = console.export_text()
    row = next(line for line in text.splitlines() if "worker" in line)
    assert "running · stalled 0:0" in row
    assert "stalled" not in next(line for line in text.splitlines() if "quiet" in line)
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)
