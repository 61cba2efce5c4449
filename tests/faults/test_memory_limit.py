"""``resources: {memory: ...}``: a node that leaks past its group's limit is killed, named
as the reason (terminal, status.json, the node's log), restarted per its policy, and the
run exits 1 when it gives up; on threads the limit is a warning (it cannot be enforced)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_support import read_pids, topo_run, wait_gone, wait_up


def _leaker(topology: Callable[..., Path], pid_file: Path) -> Path:
    return topology(f"""
        name: leak
        nodes:
          leaker:
            target: "fault_nodes:Leaker"
            args: {{mib_per_s: 120, pid_file: "{pid_file}"}}
            resources: {{memory: 300MiB}}
            restart: {{policy: on-failure, max_restarts: 1, backoff: {{initial_s: 0.05}}}}
          echo: {{target: "fault_nodes:Echo"}}
    """)


@pytest.mark.slow
def test_a_leaking_node_is_killed_for_its_memory_limit_and_restarted(
    topology: Callable, tmp_path: Path
) -> None:
    pid_file, runs = tmp_path / "pids", tmp_path / "runs"
    path = _leaker(topology, pid_file)
    with topo_run(str(path), "-b", "procs", "--no-live", "--log-dir", str(runs)) as proc:
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    pids = read_pids(pid_file, timeout=1)
    assert len(pids) == 2, out  # the first attempt and its restart
    assert not wait_gone(pids, 10)
    said = re.findall(r"node leaker \(pid (\d+)\) exceeded its memory limit 300 MiB", out)
    assert said, out
    assert "restart 1/1" in out and "failed 2 times, giving up" in out, out
    (status,) = runs.glob("*-*/status.json")
    failure = json.loads(status.read_text())["failure"]
    assert "exceeded its memory limit 300 MiB" in failure["message"]
    (log,) = runs.glob("*-*/logs/leaker.log")
    assert "exceeded its memory limit 300 MiB" in log.read_text()


def test_on_threads_the_limit_is_a_warning(topology: Callable, tmp_path: Path) -> None:
    path = topology("""
        name: capped
        nodes:
          echo: {target: "fault_nodes:Echo", resources: {memory: 1GiB}}
    """)
    runs = tmp_path / "runs"
    with topo_run(str(path), "-b", "threads", "--no-live", "--log-dir", str(runs)) as proc:
        lines = wait_up(proc)  # it runs, without the limit
        proc.terminate()
        rest, _ = proc.communicate(timeout=60)
    text = "".join(lines) + rest
    assert "warning: group 'echo' sets resources.memory" in text, text
    assert "cannot enforce" in text and proc.returncode == 143, text
