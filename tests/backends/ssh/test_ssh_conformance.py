"""The backend conformance suite (``topo.testing.suite``) on the ssh backend, across the
three test hosts. Their node processes are in this machine's pid space but inside the
hosts' network namespaces: a node is gone when no host runs its pid (``ip netns pids``),
and a run leaves nothing when the hosts run nothing but sshd."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends.ssh.conftest import on_hosts, wait_no_strays
from tests.backends.ssh.testhosts import HostSet
from topo.testing.suite import BackendSuite, BackendUnderTest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


class TestSsh(BackendSuite):
    @pytest.fixture
    def under_test(self, ssh_hosts: HostSet, tmp_path: Path) -> BackendUnderTest:
        # workdir: the hosts import this checkout's topo (and its nodes) as the launcher does
        hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml", workdir=str(ROOT))
        return BackendUnderTest(
            "ssh",
            {"hosts": hosts},
            ("--hosts", str(hosts)),
            ready_s=90.0,
            pids_local=False,
            gone=lambda pids, timeout: on_hosts(ssh_hosts, pids, timeout),
            leftovers=lambda timeout: wait_no_strays(ssh_hosts, timeout),
        )
