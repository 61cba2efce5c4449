"""The conformance suite every backend passes: subclass ``BackendSuite`` in a test
module (its name starting with ``Test``) with a fixture ``under_test`` that says how to
run programs on your backend, and pytest runs every test of the suite on it::

    from topo.testing.suite import BackendSuite, BackendUnderTest

    class TestMyBackend(BackendSuite):
        @pytest.fixture
        def under_test(self) -> BackendUnderTest:
            return BackendUnderTest("mybackend", {"queue": "test"}, ("--queue", "test"))

It covers what every backend must do alike: the lifecycle (start, ready, run() returns,
the program stops), failures and restart policies, stopping within the grace (and
killing after it), logs, rights, snapshots, ``topo apply``, detached runs operated from
other shells, and Launchpad programs -- each test checking that no process is left. A
backend that declares it cannot do something (``Backend.cannot``, ``can_update``) has
those tests skipped with its reason. The nodes the suite runs are in
``topo.testing.nodes``, importable wherever topo is installed.

The test module needs the ``topo.testing`` plugin (``pytest_plugins = ["topo.testing"]``
in a conftest.py): the suite starts programs through its ``topo_launch`` fixture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from topo.testing.suite.apply import Apply
from topo.testing.suite.detached import Detached
from topo.testing.suite.devices import Devices
from topo.testing.suite.failures import Failures
from topo.testing.suite.harness import BackendUnderTest, Harness
from topo.testing.suite.launchpad import Launchpad
from topo.testing.suite.logs import Logs
from topo.testing.suite.rights import Rights
from topo.testing.suite.running import Lifecycle
from topo.testing.suite.snapshots import Snapshots
from topo.testing.suite.stopping import Stopping

__all__ = ["BackendSuite", "BackendUnderTest", "Harness"]


class BackendSuite(
    Lifecycle, Failures, Stopping, Logs, Rights, Snapshots, Apply, Detached, Launchpad, Devices
):
    """Every conformance test; a subclass gives the ``under_test`` fixture."""

    @pytest.fixture
    def under_test(self) -> BackendUnderTest:
        """How to run programs on the backend: a subclass overrides this fixture."""
        raise NotImplementedError(
            f"{type(self).__name__} must define the fixture under_test (a BackendUnderTest)"
        )

    @pytest.fixture
    def suite(self, under_test: BackendUnderTest, topo_launch: Any, tmp_path: Path) -> Harness:
        """The test's means on the backend under test."""
        return Harness(under_test, topo_launch, tmp_path)
