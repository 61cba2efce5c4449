"""Ray clusters for the ray backend's tests (see ``cluster``): a one-node cluster, and a
head with a worker in each of three test hosts. Each lasts for the one test module that
uses it (not the session: no Ray process may be inside a test host when the ssh tests
check that nothing but sshd runs there)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.backends.ray.cluster import Cluster, on_test_hosts, one_node, ray_missing
from tests.backends.ssh.testhosts import NET, HostSet

LABEL = "topo_test_label"  # a custom resource of the one-node cluster (a host label)


def _stopped(cluster: Cluster) -> None:
    left = cluster.stop()
    assert not left, f"the test Ray cluster left processes behind: {left}"


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Cluster]:
    """One Ray node: 4 (declared) CPUs, 1 (declared) GPU and the custom resource
    ``LABEL``."""
    reason = ray_missing()
    if reason:
        pytest.skip(reason)
    cluster = one_node({LABEL: 1}, cpus=4, gpus=1)
    try:
        yield cluster
    finally:
        _stopped(cluster)


@pytest.fixture(scope="module")
def ray_hosts(ray_test_hosts: HostSet) -> Iterator[Cluster]:
    """Four Ray nodes: the head (``host_head``) on the bridge, workers ``h1``..``h3``
    (``host_h1``..) inside the Ray tests' three test hosts (``topo-h4..h6``, beside the
    ssh tests' own); 1 CPU each."""
    reason = ray_missing()
    if reason:
        pytest.skip(reason)
    pids = {}
    for name in ray_test_hosts.names:
        [pids[name]] = ray_test_hosts.sshd_pids(name)
    cluster = on_test_hosts(ray_test_hosts.names, pids, f"{NET}.1")
    try:
        yield cluster
    finally:
        _stopped(cluster)
