"""``topo apply`` on the ray backend, on the four-node test cluster (a head on the bridge,
a worker in each test host): a group's count up and down, a changed argument restarted
replica by replica, a group added and one removed -- while a caller loops over a handle
to the whole group and never sees an error, every node the change does not touch keeps
its process, new nodes get bundles of their own placed by the rules of the start (a spread
group's new replicas on Ray nodes of their own, a host label's node), the bundles of what
left are released, and a change the cluster cannot hold is refused and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.backends.ray.applying import NODES, calls_go_on, groups_of, launch, pids, workers
from tests.backends.ray.cluster import Cluster, ray_missing
from topo.api import ApplyRefused, RunningProgram
from topo.testing import wait_for_text, wait_gone, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing())),
]


def test_count_up_spreads_new_replicas_over_nodes_of_their_own_and_down_releases_them(
    ray_hosts: Cluster, topo_launch: Callable[..., RunningProgram], tmp_path: Path
) -> None:
    run = launch(topo_launch, ray_hosts, workers(tmp_path, 1, spread=True))
    kept = pids(run, ["worker/0", "caller"])
    started = set(groups_of(run))

    up = run.apply(workers(tmp_path, 3, spread=True), timeout=240)
    assert up.result == "applied", up.record
    stats = calls_go_on(run, 100)
    assert stats["members"] == ["worker/0", "worker/1", "worker/2"]
    assert set(stats["answered"]) == {"worker/0", "worker/1", "worker/2"}
    assert pids(run, list(kept)) == kept  # nothing the change did not touch restarted
    grown = pids(run, ["worker/0", "worker/1", "worker/2"])
    on = {n: ray_hosts.node_of(p) for n, p in grown.items()}
    assert None not in on.values() and len(set(on.values())) == 3, on  # a Ray node each
    assert {run.launcher.state.location(n) for n in on} == {
        ray_hosts.ips[str(h)] for h in on.values()
    }
    added = {g: s for g, s in groups_of(run).items() if g not in started}
    assert [g.rsplit("/", 1)[1] for g in added] == ["worker#1"], added  # the new ones only
    assert set(added.values()) == {"CREATED"}

    # five replicas would need five nodes: refused, and nothing changes
    with pytest.raises(ApplyRefused, match=r"group 'worker' sets resources.spread") as info:
        run.apply(workers(tmp_path, 5, spread=True))
    assert "and the cluster has 1" in str(info.value) and ".yaml:" in str(info.value)
    assert run.launcher.state.generation == 1

    down = run.apply(workers(tmp_path, 1, spread=True), timeout=240)
    assert down.result == "applied", down.record
    stats = calls_go_on(run, 50)
    assert stats["members"] == ["worker/0"] and stats["errors"] == []
    assert pids(run, list(kept)) == kept
    assert not wait_gone([grown["worker/1"], grown["worker/2"]], 20)
    wait_until(  # their bundles were given back once they ended
        lambda: groups_of(run)[next(iter(added))] == "REMOVED", 20, what="the group removed"
    )
    assert {g: s for g, s in groups_of(run).items() if g in started} == dict.fromkeys(
        started, "CREATED"
    )  # the start's groups are untouched
    assert run.stop(timeout=90) == 0
    assert not wait_gone(list(kept.values()), 20)


def test_a_rolling_restart_and_a_group_added_on_its_label_then_removed(
    ray_hosts: Cluster, topo_launch: Callable[..., RunningProgram], tmp_path: Path
) -> None:
    run = launch(topo_launch, ray_hosts, workers(tmp_path, 2))
    caller = pids(run, ["caller"])["caller"]
    before = pids(run, ["worker/0", "worker/1"])
    was = {n: ray_hosts.node_of(p) for n, p in before.items()}

    change = run.apply(workers(tmp_path, 2, tag="v2"), timeout=240)
    assert change.result == "applied", change.record
    assert change.record is not None
    restarts = [s["nodes"] for s in change.record["steps"] if s["step"] == "restart"]
    assert restarts == [["worker/0"], ["worker/1"]]  # one replica at a time
    after = pids(run, ["worker/0", "worker/1"])
    assert all(after[n] != before[n] for n in before)
    assert [run.handle(f"worker/{i}").work(0)["tag"] for i in range(2)] == ["v2", "v2"]
    assert {n: ray_hosts.node_of(p) for n, p in after.items()} == was  # its bundle's node
    assert not wait_gone(list(before.values()), 20)

    extra = 'extra: {target: "' + NODES + ':Worker", args: {worker_id: 99}, '
    extra += "resources: {host_labels: [host_h2]}}"
    added = run.apply(workers(tmp_path, 2, tag="v2", extra=extra), timeout=240)
    assert added.result == "applied", added.record
    assert run.handle("extra").work(1)["id"] == 99
    extra_pid = pids(run, ["extra"])["extra"]
    assert ray_hosts.node_of(extra_pid) == "h2"
    assert run.launcher.state.location("extra") == ray_hosts.ips["h2"]
    log = run.run_dir / "logs" / "extra.log"  # its output is pulled from its agent
    wait_for_text(log, "worker 99 (v1) up", 20)

    removed = run.apply(workers(tmp_path, 2, tag="v2"), timeout=240)
    assert removed.result == "applied", removed.record
    assert "extra" not in run.launcher.state.nodes and "extra" not in run.program.node_index
    assert not wait_gone([extra_pid], 20)
    extra_groups = [g for g in groups_of(run) if g.endswith("#1")]  # (the restart added none)
    assert extra_groups and all(groups_of(run)[g] == "REMOVED" for g in extra_groups)
    stats = calls_go_on(run, 50)
    assert stats["errors"] == [] and stats["pid"] == caller
    assert pids(run, ["worker/0", "worker/1"]) == after
    assert run.stop(timeout=90) == 0
    assert not wait_gone([caller, *after.values()], 20)


def test_a_change_the_cluster_cannot_hold_is_refused_and_changes_nothing(
    ray_hosts: Cluster, topo_launch: Callable[..., RunningProgram], tmp_path: Path
) -> None:
    run = launch(topo_launch, ray_hosts, workers(tmp_path, 2))
    before = pids(run, ["worker/0", "worker/1", "caller"])
    groups = groups_of(run)
    big = 'big: {target: "' + NODES + ':Worker", args: {worker_id: 7}, '
    big += "resources: {cpus: [0, 1]}}"  # two CPUs; every node has one
    with pytest.raises(ApplyRefused, match=r"group 'big': no live Ray node has 2 CPU free"):
        run.apply(workers(tmp_path, 2, extra=big))
    nowhere = 'lost: {target: "' + NODES + ':Worker", args: {worker_id: 8}, '
    nowhere += "resources: {host_labels: [no_such_label]}}"
    with pytest.raises(ApplyRefused, match=r"label 'no_such_label' free"):
        run.apply(workers(tmp_path, 2, extra=nowhere))
    assert run.launcher.state.generation == 0
    assert sorted(run.launcher.state.nodes) == ["caller", "worker/0", "worker/1"]
    assert pids(run, list(before)) == before
    assert groups_of(run) == groups  # nothing was reserved
    assert not (run.run_dir / "changes").exists()
    assert run.handle("caller").stats()["errors"] == []
    assert run.stop(timeout=90) == 0
    assert not wait_gone(list(before.values()), 20)
