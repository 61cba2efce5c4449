"""Helpers of the ``topo apply`` tests on Ray: the topologies (``tests/apply/apply_nodes``
workers and a caller looping over them), a run on a test cluster, and what it says."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.backends.ray.cluster import Cluster
from topo.api import RunningProgram
from topo.testing import wait_until

NODES = "tests.apply.apply_nodes"  # the cluster's nodes share this machine's filesystem
READY_S = 120.0


def workers(
    tmp_path: Path, n: int, *, tag: str = "v1", spread: bool = False, extra: str = ""
) -> Path:
    """Workers ``worker/0..n-1`` and a caller looping over ``@worker``; ``extra``: one
    more group (a YAML line under ``nodes:``)."""
    resources = ", resources: {spread: true}" if spread else ""
    args = f'{{worker_id: "${{replica}}", tag: {tag}}}'
    text = f"""\
name: ray_apply
nodes:
  worker: {{target: "{NODES}:Worker", count: {n}, args: {args}{resources}}}
  caller: {{target: "{NODES}:Caller", args: {{workers: "@worker"}}}}
  {extra}
"""
    path = tmp_path / f"workers-{n}-{tag}-{spread}-{len(list(tmp_path.glob('*.yaml')))}.yaml"
    path.write_text(text)
    return path


def pids(run: RunningProgram, nodes: list[str]) -> dict[str, int]:
    return {n: int(run.handle(n, timeout=30).pid()) for n in nodes}


def calls_go_on(run: RunningProgram, more: int = 50, timeout: float = 60) -> dict[str, Any]:
    """The caller's stats once it made ``more`` calls more."""
    caller = run.handle("caller", timeout=30)
    start = caller.stats()["calls"]
    return wait_until(
        lambda: s if (s := caller.stats())["calls"] >= start + more else None,
        timeout,
        what=f"{more} calls more by the caller",
        every=0.1,
    )


def groups_of(run: RunningProgram) -> dict[str, str]:
    """The run's placement groups: name -> state (``CREATED``, ``REMOVED``...)."""
    from ray.util.placement_group import placement_group_table

    namespace = run.launcher.backend.namespace  # type: ignore[attr-defined]
    table = placement_group_table()
    return {
        str(g["name"]): str(g["state"])
        for g in table.values()
        if str(g.get("name", "")).startswith(f"{namespace}/")
    }


def launch(
    topo_launch: Callable[..., RunningProgram], cluster: Cluster, path: Path
) -> RunningProgram:
    from topo.backends.ray.backend import RayBackend

    return topo_launch(path, RayBackend(address=cluster.address), ready_timeout=READY_S)
