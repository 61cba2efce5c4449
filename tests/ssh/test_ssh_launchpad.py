"""A Launchpad program (``topo.launchpad``) on the ssh backend: the same IR as YAML, so
it runs across the real SSH hosts, pickled constructors included."""

from __future__ import annotations

from pathlib import Path

import pytest

import topo.launchpad as lp
from tests.ssh import ssh_nodes
from tests.ssh.testhosts import HostSet

pytestmark = pytest.mark.slow


def test_a_launchpad_program_runs_across_hosts(ssh_hosts: HostSet, tmp_path: Path) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    program = lp.Program("lp_on_ssh")
    with program.group("where"):
        handles = [program.add_node(lp.CourierNode(ssh_nodes.Where)) for _ in range(3)]
    # A lambda cannot be imported by name: it travels cloudpickled in the program.
    made = program.add_node(lp.CourierNode(lambda: ssh_nodes.Where()), label="made here")
    launched = lp.launch(
        program,
        backend="ssh",
        backend_options={"hosts": hosts},
        log_dir=str(tmp_path / "runs"),
    )
    try:
        assert launched.program.node("made_here").factory is not None
        wheres = [h.dereference().where() for h in handles]
        assert {w["host"] for w in wheres} == set(ssh_hosts.names)  # spread over 3 hosts
        assert made is not None
        assert made.dereference().where()["host"] in ssh_hosts.names
    finally:
        assert launched.stop(timeout=60) == 0
