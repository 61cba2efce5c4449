"""The backend conformance suite (``topo.testing.suite``) on the backends of this
machine: threads, procs, and a plug-in written here (``bk_subprocs``: each executable a
subprocess of its own), registered by entry point as an installed one would be. ssh and
ray pass it in tests/backends/ssh and tests/backends/ray."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from bk_plugins import install

from topo.backends.base import _table
from topo.testing import wait_gone
from topo.testing.suite import BackendSuite, BackendUnderTest
from topo.testing.suite.running import PIPELINE

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


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


def test_the_worked_example_of_docs_extending_runs_a_program(tmp_path: Path) -> None:
    """docs/extending.md's backend, as the page writes it, installed as a plug-in:
    ``topo run -b`` with it runs a program to its end."""
    page = (ROOT / "docs" / "extending.md").read_text()
    found = re.search(r"```python\n(import contextlib.*?)```", page, re.S)
    assert found is not None, "the worked example is gone from docs/extending.md"
    site = tmp_path / "site"
    (site / "my_pkg").mkdir(parents=True)
    (site / "my_pkg" / "__init__.py").write_text("")
    (site / "my_pkg" / "backend.py").write_text(found.group(1))
    info = site / "my_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[topo.backends]\ndocs = my_pkg.backend:Subprocesses\n")
    topology = tmp_path / "pipeline.yaml"
    topology.write_text(textwrap.dedent(PIPELINE))
    done = subprocess.run(
        [sys.executable, "-m", "topo", "run", str(topology), "-b", "docs", "--no-live"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "6 results from 2 producers, sum 55" in done.stdout
    [run_dir] = [p for p in (tmp_path / "runs").iterdir() if not p.is_symlink()]
    record = json.loads((run_dir / "status.json").read_text())
    pids = [n["pid"] for n in record["nodes"]]
    assert len(set(pids)) == 3 and not wait_gone(pids, 15)  # a process each, all ended
