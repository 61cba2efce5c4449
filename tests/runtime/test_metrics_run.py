"""Metrics end to end on the procs and threads backends: node code writes rows, the
launcher stores them under the run directory and shows the latest figures.

The node code is in this module (``test_metrics_run:...``): pytest puts this directory on
``sys.path``, and the procs fork server gets the launcher's ``sys.path``."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

import topo
from topo.runtime.context import current_node_info, current_program
from topo.supervisor.metrics_store import metrics_path
from topo.testing import wait_gone, wait_until

BACKENDS = ["procs", "threads"]


def write_curve(rows: int = 5, bad: bool = False) -> None:
    """A py node: ``rows`` rows of a rising return, then (``bad``) rows the store must drop,
    sent past the logger's checks, then one more good row."""
    log = topo.metrics.logger("train")
    for i in range(rows):
        log.write(
            {"episode_return": 10.0 * i, "actor_steps": np.int64(100 * i), "steps_per_s": 2100.0}
        )
    if bad:
        me = current_node_info()
        assert me is not None
        book: Any = current_program().address_book
        book.metrics([{"node": "ghost", "time": 1.0, "x": 1}, {"node": me.id}, "x"])
        book.metrics([{"node": me.id, "time": 2.0, "x": [1, 2]}])
        log.write({"after_bad": 1})


class Reporter:
    """A served node that writes one row, then serves until the program stops."""

    def __init__(self) -> None:
        topo.metrics.logger().write({"episode_return": 187.34, "steps_per_s": 2134.0})

    def ping(self) -> str:
        return "pong"


def _topology(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "metrics.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_land_in_per_node_files_and_status_json(
    topo_launch: Callable, tmp_path: Path, backend: str
) -> None:
    path = _topology(
        tmp_path,
        """
        name: curves
        nodes:
          writer: {kind: py, target: "test_metrics_run:write_curve", count: 2, args: {rows: 5}}
          bad: {kind: py, target: "test_metrics_run:write_curve", args: {rows: 2, bad: true}}
        """,
    )
    run = topo_launch(path, backend)
    assert run.wait(60) == 0  # bad rows do not stop the run
    for node in ("writer/0", "writer/1"):
        rows = [json.loads(x) for x in metrics_path(run.run_dir, node).read_text().splitlines()]
        assert [r["episode_return"] for r in rows] == [0.0, 10.0, 20.0, 30.0, 40.0]
        assert {r["node"] for r in rows} == {node} and {r["label"] for r in rows} == {"train"}
        assert rows[-1]["actor_steps"] == 400
    bad_rows = metrics_path(run.run_dir, "bad").read_text().splitlines()
    assert [json.loads(x).get("after_bad") for x in bad_rows] == [None, None, 1]
    status = json.loads((run.run_dir / "status.json").read_text())
    figures = {n["id"]: n["metrics"] for n in status["nodes"]}
    assert figures["writer/1"] == {
        "episode_return": 40.0,
        "actor_steps": 400,
        "steps_per_s": 2100.0,
    }
    assert figures["bad"]["after_bad"] == 1
    assert status["metrics_rows"] == 13 and status["metrics_dropped"] == 4
    assert any("dropped a metrics row" in w for w in status["warnings"])
    assert not wait_gone(run.pids(), 15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_live_figures_while_the_program_runs(
    topo_launch: Callable, tmp_path: Path, backend: str
) -> None:
    from topo.cli.view import TableView

    path = _topology(
        tmp_path, "name: live\nnodes:\n  reporter: {target: test_metrics_run:Reporter}\n"
    )
    run = topo_launch(path, backend)
    assert run.wait_ready(60)

    def with_metrics() -> dict[str, Any] | None:  # status.json is rewritten as the run goes
        status: dict[str, Any] = json.loads((run.run_dir / "status.json").read_text())
        return status if status["nodes"][0]["metrics"] else None

    status = wait_until(with_metrics, 30, what="figures in status.json")
    assert status["state"] == "running"
    assert status["nodes"][0]["metrics"] == {"episode_return": 187.34, "steps_per_s": 2134.0}
    console = Console(record=True, width=200, force_terminal=False)
    view = TableView(run.launcher.state, console)
    view.close()
    assert "episode_return 187.3 · steps/s 2.13k" in console.export_text()
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)
