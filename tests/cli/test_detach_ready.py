"""``topo run -d`` returns as soon as every node is up, even on a machine the run and
other work keep busy: the launcher tells the waiting command the moment its nodes are up
(not at its next look), and the command then ends at once, without the interpreter's
teardown, which took it 0.5-4 s on a loaded machine (``bench/cli_operate_bench.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.cli.operate import env, run_pids, ticker_topology
from topo.testing import wait_gone, wait_until

# Issue 40's goal -- run -d returns within 1 s of the nodes being up -- is measured by
# bench/cli_operate_bench.py (0.01 s idle, 0.13 s beside two busy loops). Here, under the
# suite's own load besides, the test holds run -d to returning on the nodes' readiness,
# not on a timer: it returned 1.02 s after them in a run beside two more busy loops.
BOUND_S = 5.0


@pytest.mark.slow
def test_run_d_returns_on_the_nodes_being_up_when_it_gets_little_cpu(
    tmp_path: Path,
) -> None:
    file = ticker_topology(tmp_path / "tickers.yaml", count=2)
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)]
    run_dir = None
    try:
        command = subprocess.Popen(
            [sys.executable, "-m", "topo", "run", str(file), "-d", "-b", "procs"],
            cwd=tmp_path,
            env=env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Once it started the launcher (which keeps its own priority), the command gets
        # as little CPU as a process can beside the two busy loops.
        wait_until(
            lambda: psutil.Process(command.pid).children(),
            60,
            what="topo run -d to start its launcher",
            every=0.01,
        )
        os.setpriority(os.PRIO_PROCESS, command.pid, 19)
        out, err = command.communicate(timeout=120)
        returned = time.time()
        assert command.returncode == 0, err
        run_dir = Path(out.split()[1])
        record = json.loads((run_dir / "status.json").read_text())
        up = record["started"] + record["ready_s"]
        assert returned - up < BOUND_S, f"returned {returned - up:.2f} s after every node was up"
    finally:
        for loop in busy:
            loop.kill()
            loop.wait()
        if run_dir is not None:
            pids = run_pids(run_dir)
            subprocess.run(
                [sys.executable, "-m", "topo", "stop", str(run_dir), "--kill"],
                cwd=tmp_path,
                env=env(tmp_path),
                capture_output=True,
                timeout=60,
            )
            assert not wait_gone(pids, 20)
