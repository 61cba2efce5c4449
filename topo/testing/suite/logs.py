"""Conformance: what nodes print (stdout and stderr) lands in their log files in the run
directory -- one file per node, also for nodes sharing a process -- and reaches the
launcher's log source, which ``topo run`` prints prefixed with the node."""

from __future__ import annotations

import re

from topo.rundir.layout import LOGS_DIR
from topo.testing.suite.harness import NODES, Harness, log_of, status

TALKERS = f"""
name: talkers
nodes:
  talker: {{target: "{NODES}:Talker"}}
  pair: {{target: "{NODES}:Talker", count: 2, colocate: {{per_process: 2}}}}
  stopper: {{target: "{NODES}:Stopper", args: {{peers: ["@talker", "@pair"]}}}}
"""


class Logs:
    """Node output in the run directory and on the launcher's terminal."""

    def test_node_output_lands_in_its_log_and_reaches_the_terminal(self, suite: Harness) -> None:
        run_dir = suite.tmp / "run"
        args = suite.run_args(suite.write(TALKERS), "--no-live", "--run-dir", str(run_dir))
        done = suite.topo(*args, timeout=240)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        nodes = ["talker", "pair/0", "pair/1"]
        for node in nodes:
            log = log_of(run_dir, node)
            assert f"{node} said 2" in log and f"{node} warned on stderr" in log, (node, log)
            others = [n for n in nodes if n != node]
            assert not [n for n in others if f"{n} said" in log], (node, log)  # its own only
            shown = re.compile(rf"{re.escape(node)}\s*\|\s*{re.escape(node)} said 1$", re.M)
            assert shown.search(done.stdout), done.stdout[-3000:]
        names = {p.name for p in (run_dir / LOGS_DIR).iterdir()}
        assert {"talker.log", "pair_0.log", "pair_1.log"} <= names, names
        pids = [n["pid"] for n in status(run_dir)["nodes"] if n["pid"]]
        suite.assert_nothing_left(pids=pids)
