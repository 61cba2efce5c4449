"""On ssh hosts too each process names itself: ``topo: agent <host>`` for the agent,
``topo: <program> fork server`` below it and ``topo: <program>/<node>`` for the nodes
(the test hosts share this machine's pid space, so /proc shows them)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.backends.ssh.testhosts import HostSet

pytestmark = pytest.mark.slow


def _title(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode().strip()


def test_remote_processes_are_titled(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    path = tmp_path / "titled.yaml"
    path.write_text(
        textwrap.dedent(
            """
            name: titled
            nodes:
              echo: {target: "tests.backends.ssh.ssh_nodes:Where", count: 3}
            """
        )
    )
    run = topo_launch(path, "ssh", backend_options={"hosts": hosts}, ready_timeout=60)
    for i in range(3):
        where = run.handle(f"echo/{i}", timeout=30).where()
        pid = int(where["pid"])
        assert _title(pid) == f"topo: titled/echo/{i}"
        server = psutil.Process(pid).parent()
        assert server is not None and _title(server.pid) == "topo: titled fork server"
        agent = server.parent()
        assert agent is not None and _title(agent.pid) == f"topo: agent {where['host']}"
    assert run.stop(timeout=60) == 0
