"""A run directory written before the names had a room of their own (``old_run``: a
threads run of topo 0.1.0 at commit 1597ebb, with a metric row and a snapshot) reads
back the same through every reader: the record, the status, the logs, the metrics, the
snapshot, the dashboard and ``topo logs``."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from topo.rundir.layout import holds_run, log_files, log_path, metrics_files, metrics_path
from topo.rundir.record import given_params, read_record, recorded_backend
from topo.rundir.snapshots import find
from topo.rundir.status import read_status
from topo.runs.history import history
from topo.runs.probe import probe
from topo.ui.reader import EventReader, RunReader

OLD_RUN = Path(__file__).with_name("old_run")


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    return Path(shutil.copytree(OLD_RUN, tmp_path / "oldrun-20261206-052835"))


def test_its_record_and_status_read_back(old_run: Path) -> None:
    assert holds_run(old_run)
    record = read_record(old_run)
    assert (record.backend, record.params, record.log_max_mb) == ("threads", {"steps": 4}, 100.0)
    assert given_params(old_run) == ["steps=4"]
    assert recorded_backend(old_run) == ("threads", {})
    status = read_status(old_run)
    assert status is not None and status["exit_code"] == 0
    info = probe(old_run)
    assert (info.state, info.name, info.nodes_total) == ("ended", "oldrun", 4)


def test_its_logs_metrics_and_snapshot_are_where_they_were(old_run: Path) -> None:
    program = RunReader(old_run).program()
    files = log_files(old_run, (n.id for n in program.nodes), program.executables)
    assert all(path.is_file() for path in files.values())
    assert files["stepper/0"] == log_path(old_run, "stepper/0") == old_run / "logs/stepper_0.log"
    assert [line for _, line in history(files)][-1].endswith(" hello from talk")
    assert metrics_path(old_run, "talk").read_text().count('"loss"') == 2
    assert metrics_files(old_run) == [metrics_path(old_run, "talk")]
    snapshot = find(old_run)
    snapshot.verify()
    assert (snapshot.number, sorted(snapshot.nodes)) == (1, ["counter", "stepper/0", "stepper/1"])


def test_the_dashboard_reads_it(old_run: Path) -> None:
    reading = RunReader(old_run).status()
    assert reading.state == "ended" and reading.nodes["talk"]["state"] == "finished"
    kinds = {e["kind"] for e in EventReader(old_run).first()}
    assert {"started", "ready", "stopped"} <= kinds


def test_topo_logs_prints_it(old_run: Path, run_topo: Callable) -> None:
    result = run_topo("logs", old_run, "talk")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["talk | hello from talk"]
