"""A reverb node on an ssh host leaves nothing in that host's temporary directory (Reverb's
default checkpointer would make an empty ``/tmp/tmpXXXXXXXX`` there for every run)."""

from __future__ import annotations

import importlib.util
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.backends.ssh.testhosts import HostSet

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("reverb") is None, reason="needs reverb"),
]


def test_a_reverb_node_leaves_nothing_in_its_hosts_temp_dir(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    temp = tmp_path / "tmp"  # every host's TMPDIR (they all see this directory)
    temp.mkdir()
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml", env={"TMPDIR": str(temp)})
    path = tmp_path / "rv.yaml"
    path.write_text(
        textwrap.dedent("""
        name: rv_ssh
        nodes:
          replay: {kind: reverb, tables: "tests.nodes.reverb_nodes:make_tables"}
          user: {target: "tests.nodes.reverb_nodes:User", args: {replay: "@replay"}}
          where: {target: "tests.backends.ssh.ssh_nodes:Where", count: 3, resources: {spread: true}}
        """)
    )
    run = topo_launch(path, "ssh", backend_options={"hosts": hosts}, ready_timeout=120)
    seen = [run.handle(f"where/{i}", timeout=30).where() for i in range(3)]
    assert {w["host"] for w in seen} == set(ssh_hosts.names)  # the replay's host among them
    assert {w["tmp"] for w in seen} == {str(temp)}  # the nodes' temp dir is this one
    assert run.handle("user", timeout=60).insert([1, 2]) == 2
    assert run.stop(timeout=60) == 0
    assert sorted(p.name for p in temp.iterdir()) == []
