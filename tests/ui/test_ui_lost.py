"""The dashboard's reading of a lost run (its launcher gone): the nodes that were live read
``lost``, a node whose process still runs reads ``orphaned`` until that process ends,
then ``lost`` (looked at again while any is left), each change a new version."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.ui.support import make_run_dir
from topo.rundir.pids import process_start
from topo.testing import wait_until
from topo.ui.reader import RunReader


def test_an_orphaned_node_reads_lost_once_its_process_ended(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path / "run", state="running")  # its launcher: none alive
    node = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        record = json.loads((run_dir / "status.json").read_text())
        first = record["nodes"][0]
        first.update(pid=node.pid, pid_start=process_start(node.pid))
        record["nodes"][-1]["state"] = "finished"  # ended before the launcher: stays so
        (run_dir / "status.json").write_text(json.dumps(record))

        reading = RunReader(run_dir)
        snap = reading.status()
        assert snap.state == "lost"
        states = {k: n["state"] for k, n in snap.nodes.items()}
        assert states[first["id"]] == "orphaned"
        assert states[record["nodes"][-1]["id"]] == "finished"
        assert set(list(states.values())[1:-1]) == {"lost"}

        node.kill()
        node.wait()
        wait_until(
            lambda: reading.status().nodes[first["id"]]["state"] == "lost",
            10,
            what="the node to read lost",
        )
        assert reading.status().version > snap.version
    finally:
        node.kill()
        node.wait()
