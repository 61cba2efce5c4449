"""``topo run -d`` on the ssh backend: the run goes on across the hosts after the command
returned; ``ps`` and ``logs`` see it, ``stop`` ends it and nothing is left on any host."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.operate import (
    ROOT,
    run_detached,
    run_pids,
    status,
    ticker_topology,
    topo,
    wait_for,
    wait_gone,
)
from tests.backends.ssh.conftest import wait_no_strays
from tests.backends.ssh.testhosts import HostSet


def test_a_detached_run_across_hosts_is_operated_and_stopped(
    ssh_hosts: HostSet, tmp_path: Path
) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml", workdir=str(ROOT))  # tests.* imports
    file = ticker_topology(tmp_path / "tickers.yaml", count=3)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "ssh", "--hosts", str(hosts))
    pids = run_pids(run_dir)
    assert {n["host"] for n in status(run_dir)["nodes"]} <= set(ssh_hosts.names)
    listed = topo("ps", cwd=tmp_path).stdout
    assert re.search(rf"{run_id}\s+tickers\s+ssh\s+running\s+3/3", listed), listed
    assert wait_for(lambda: "ticker/2 | t tick 3" in topo("logs", cwd=tmp_path).stdout)
    stopped = topo("stop", run_id, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert not wait_gone(pids)
    assert not wait_no_strays(ssh_hosts, 10)
