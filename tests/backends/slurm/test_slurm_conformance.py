"""The backend conformance suite (``topo.testing.suite``) on the slurm backend, inside an
allocation of both nodes of the test cluster (as in an salloc shell): the launcher is
this test process (or a ``topo`` command) with the job in its environment, each node's
agent an ``srun`` step. The test cluster's nodes are this machine, so node pids are
this machine's; a run leaves nothing when the job runs no step any more."""

from __future__ import annotations

import pytest

from tests.backends.slurm.conftest import Allocation
from topo.testing import wait_until
from topo.testing.suite import BackendSuite, BackendUnderTest

pytestmark = pytest.mark.slow


def no_steps(allocation: Allocation):  # type: ignore[no-untyped-def]
    """``leftovers`` of the suite: the job's steps still running after ``timeout``."""

    def left(timeout: float) -> list[str]:
        try:
            wait_until(lambda: not allocation.cluster.steps(allocation.job), timeout, every=0.2)
        except AssertionError:
            return allocation.cluster.steps(allocation.job)
        return []

    return left


class TestSlurm(BackendSuite):
    @pytest.fixture
    def under_test(
        self, slurm_allocation: Allocation, monkeypatch: pytest.MonkeyPatch
    ) -> BackendUnderTest:
        env = slurm_allocation.env()
        for key in ("SLURM_CONF", "SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
            monkeypatch.setenv(key, env[key])  # topo.launch runs here
        shell = {k: v for k, v in env.items() if k.startswith("SLURM")}
        return BackendUnderTest(
            "slurm", env=shell, ready_s=90.0, leftovers=no_steps(slurm_allocation)
        )
