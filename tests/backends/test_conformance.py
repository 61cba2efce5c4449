"""The backend conformance suite (``topo.testing.suite``) on the backends of this
machine: threads, procs, and a plug-in written here (``bk_subprocs``: each executable a
subprocess of its own), registered by entry point as an installed one would be. ssh and
ray pass it in tests/backends/ssh and tests/backends/ray."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bk_plugins import install

from topo.backends.base import _table
from topo.testing.suite import BackendSuite, BackendUnderTest

HERE = Path(__file__).resolve().parent


class TestThreads(BackendSuite):
    @pytest.fixture
    def under_test(self) -> BackendUnderTest:
        return BackendUnderTest("threads")


class TestProcs(BackendSuite):
    @pytest.fixture
    def under_test(self) -> BackendUnderTest:
        return BackendUnderTest("procs")


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The test plug-ins installed (a dist-info on the path) for this process and the
    commands it runs; gone from the table of backends afterwards."""
    site = install(tmp_path_factory.mktemp("site"))
    sys.path.insert(0, str(site))
    _table.cache_clear()
    yield site
    sys.path.remove(str(site))
    _table.cache_clear()


class TestPlugin(BackendSuite):
    @pytest.fixture
    def under_test(self, plugin_site: Path) -> BackendUnderTest:
        return BackendUnderTest("subprocs", env={"PYTHONPATH": f"{HERE}:{plugin_site}"})
