"""The backend conformance suite (``topo.testing.suite``) on the ray backend, on the
one-node test cluster (``ray_cluster``: made once for this module)."""

from __future__ import annotations

import pytest

from tests.backends.ray.cluster import Cluster, ray_missing
from topo.testing.suite import BackendSuite, BackendUnderTest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing())),
]


class TestRay(BackendSuite):
    @pytest.fixture
    def under_test(self, ray_cluster: Cluster) -> BackendUnderTest:
        address = ray_cluster.address
        return BackendUnderTest("ray", {"address": address}, ("--address", address), ready_s=120)
