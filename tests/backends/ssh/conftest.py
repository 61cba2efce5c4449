"""Fixtures for the ssh backend's end-to-end tests on the three real SSH hosts of
``test_hosts`` (tests/conftest.py): each test leaves nothing but sshd on them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pytest

from tests.backends.ssh.testhosts import HostSet
from topo.testing import wait_until


def strays(hosts: HostSet) -> dict[str, list[int]]:
    """Processes inside the hosts other than their sshd listeners (and its sessions)."""
    import psutil

    out = {}
    for name in hosts.names:
        keep = set(hosts.sshd_pids(name))
        left = []
        for pid in hosts.pids(name):
            if pid in keep:
                continue
            try:
                proc = psutil.Process(pid)
                if proc.name() == "sshd" or proc.status() == psutil.STATUS_ZOMBIE:
                    continue  # sshd's per-connection processes end with their connections
            except psutil.NoSuchProcess:
                continue
            left.append(pid)
        if left:
            out[name] = left
    return out


def wait_no_strays(hosts: HostSet, timeout: float) -> dict[str, list[int]]:
    """Wait until nothing but sshd runs inside the hosts; what is left after ``timeout``."""
    try:
        wait_until(lambda: not strays(hosts), timeout, what="the hosts to run only sshd")
    except AssertionError:
        return strays(hosts)
    return {}


def on_hosts(hosts: HostSet, pids: Iterable[int], timeout: float = 20.0) -> list[int]:
    """The ``pids`` still running inside a test host after up to ``timeout``."""
    wanted = set(pids)

    def running() -> list[int]:
        return sorted(wanted & {p for h in hosts.names for p in hosts.pids(h)})

    try:
        wait_until(lambda: not running(), timeout, what="the processes to end on the hosts")
    except AssertionError:
        return running()
    return []


@pytest.fixture
def ssh_hosts(test_hosts: HostSet) -> Iterator[HostSet]:
    """The test hosts, with every host checked empty (but for sshd) after the test."""
    for name in test_hosts.names:  # a test that cut a host off and failed
        test_hosts.set_link(name, True)
    yield test_hosts
    for name in test_hosts.names:
        test_hosts.set_link(name, True)
    left = wait_no_strays(test_hosts, 10)
    assert not left, f"processes left on the test hosts: {left}"
