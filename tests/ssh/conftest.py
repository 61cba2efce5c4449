"""Fixtures for the ssh backend's end-to-end tests: three real SSH hosts (see
``testhosts``), brought up once per session unless they are up already."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.ssh import testhosts
from tests.ssh.testhosts import HostSet


@pytest.fixture(scope="session")
def test_hosts() -> Iterator[HostSet]:
    """Three SSH hosts (skips with the reason where they cannot be made)."""
    reason = testhosts.unavailable()
    if reason:
        pytest.skip(reason)
    hosts = testhosts.existing()
    mine = hosts is None
    if hosts is None:
        hosts = testhosts.up(3)
    if len(hosts.names) < 3:
        pytest.skip(f"only {len(hosts.names)} test hosts are up; these tests need 3")
    try:
        yield hosts
    finally:
        if mine:
            testhosts.down()


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
    end = time.monotonic() + timeout
    left = strays(hosts)
    while left and time.monotonic() < end:
        time.sleep(0.1)
        left = strays(hosts)
    return left


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
