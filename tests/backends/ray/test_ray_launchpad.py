"""A Launchpad program (``topo.launchpad``) on a Ray cluster, pickled constructors
included: the same IR as YAML, so every backend runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

import topo.launchpad as lp
from tests.backends.ray import ray_nodes
from tests.backends.ray.cluster import Cluster, ray_missing
from topo.testing import wait_gone

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing())),
]


def test_a_launchpad_program_runs_on_ray(ray_cluster: Cluster, tmp_path: Path) -> None:
    program = lp.Program("lp_on_ray")
    with program.group("where"):
        first = program.add_node(lp.CourierNode(ray_nodes.Where))
        second = program.add_node(lp.CourierNode(lambda: ray_nodes.Where()))
    launched = lp.launch(
        program,
        backend="ray",
        backend_options={"address": ray_cluster.address},
        log_dir=str(tmp_path / "runs"),
    )
    try:
        assert first is not None and second is not None
        one, two = first.dereference().where(), second.dereference().where()
        assert one["pid"] != two["pid"]  # two processes
    finally:
        assert launched.stop(timeout=60) == 0
    assert not wait_gone(launched.run.pids(), 15)
