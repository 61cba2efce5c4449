"""``topo apply`` on the ssh backend, on the three test hosts, where placement is its own:
the new nodes land on hosts by the placement rules of the start (a spread group's new
replicas on hosts of their own, a labelled group on its host), a rolling restart keeps
each replica on its host, a change no host can take is refused and changes nothing, and
a new node on a lost host restarts elsewhere. Count up and down, rolling restarts and
groups in and out on every backend: the conformance suite (test_ssh_conformance.py)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.backends.ssh.conftest import on_hosts, wait_no_strays
from tests.backends.ssh.testhosts import HostSet
from tests.cli.operate import ROOT, run_detached, run_pids, status, topo
from topo.api import ApplyRefused, RunningProgram
from topo.testing import wait_gone, wait_until

pytestmark = pytest.mark.slow
NODES = "tests.apply.apply_nodes"  # imported on the hosts from the launcher's directory
READY_S = 90.0


def _workers(
    tmp_path: Path, n: int, *, tag: str = "v1", spread: bool = False, extra: str = ""
) -> Path:
    """Workers ``worker/0..n-1`` and a caller looping over ``@worker``; ``extra``: more
    groups (YAML lines under ``nodes:``)."""
    resources = "\n    resources: {spread: true}" if spread else ""
    text = f"""\
name: ssh_apply
nodes:
  worker:
    target: "{NODES}:Worker"
    count: {n}
    args: {{worker_id: "${{replica}}", tag: {tag}}}{resources}
  caller:
    target: "{NODES}:Caller"
    args: {{workers: "@worker"}}
{textwrap.indent(textwrap.dedent(extra), "  ")}"""
    path = tmp_path / f"workers-{n}-{tag}-{spread}-{abs(hash(extra))}.yaml"
    path.write_text(text)
    return path


def _pids(run: RunningProgram, nodes: list[str]) -> dict[str, int]:
    return {n: int(run.handle(n, timeout=30).pid()) for n in nodes}


def _host_of(hosts: HostSet, pid: int) -> str | None:
    """The test host whose namespace holds process ``pid``."""
    return next((h for h in hosts.names if pid in hosts.pids(h)), None)


def _calls_go_on(run: RunningProgram, more: int = 50, timeout: float = 60) -> dict[str, Any]:
    """The caller's stats once it made ``more`` calls more."""
    caller = run.handle("caller", timeout=30)
    start = caller.stats()["calls"]
    return wait_until(  # type: ignore[no-any-return]
        lambda: (s := caller.stats())["calls"] >= start + more and s, timeout
    )


def _launch(
    topo_launch: Callable[..., RunningProgram], path: Path, hosts: Path, **kwargs: Any
) -> RunningProgram:
    return topo_launch(
        path, "ssh", backend_options={"hosts": hosts}, ready_timeout=READY_S, **kwargs
    )


def test_count_up_spreads_the_new_replicas_over_hosts_and_a_fourth_is_refused(
    ssh_hosts: HostSet, topo_launch: Callable[..., RunningProgram], tmp_path: Path
) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    run = _launch(topo_launch, _workers(tmp_path, 1, spread=True), hosts)
    kept = _pids(run, ["worker/0", "caller"])

    up = run.apply(_workers(tmp_path, 3, spread=True), timeout=180)
    assert up.result == "applied", up.record
    assert _pids(run, list(kept)) == kept  # nothing the change did not touch restarted
    workers = _pids(run, ["worker/0", "worker/1", "worker/2"])
    on = {n: _host_of(ssh_hosts, pid) for n, pid in workers.items()}
    assert sorted(h for h in on.values() if h) == sorted(ssh_hosts.names), on  # a host each
    assert all(run.launcher.state.location(n) == on[n] for n in on), on  # and the backend knows it

    # a fourth replica would need a fourth host: refused, and nothing changes
    with pytest.raises(ApplyRefused, match=r"group 'worker' sets resources.spread") as info:
        run.apply(_workers(tmp_path, 4, spread=True))
    assert ".yaml:" in str(info.value)  # where the group is in the file
    assert run.launcher.state.generation == 1
    assert sorted(run.launcher.state.nodes) == ["caller", "worker/0", "worker/1", "worker/2"]
    assert _calls_go_on(run, 50)["errors"] == []


def test_a_rolling_restart_keeps_the_hosts_and_a_labelled_group_lands_on_its_host(
    ssh_hosts: HostSet, topo_launch: Callable[..., RunningProgram], tmp_path: Path
) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml", hosts={"topo-h3": {"labels": ["gpu"]}})
    run = _launch(topo_launch, _workers(tmp_path, 2), hosts)
    before = _pids(run, ["worker/0", "worker/1"])

    change = run.apply(_workers(tmp_path, 2, tag="v2"), timeout=180)
    assert change.result == "applied", change.record
    after = _pids(run, ["worker/0", "worker/1"])
    assert all(after[n] != before[n] for n in before)  # restarted: new processes
    assert {n: run.launcher.state.location(n) for n in before} == {
        n: _host_of(ssh_hosts, p) for n, p in after.items()
    }  # on the hosts they ran on
    assert not on_hosts(ssh_hosts, list(before.values()))

    labelled = 'extra: {target: "' + NODES + ':Worker", args: {worker_id: 99}, '
    labelled += "resources: {host_labels: [gpu]}}"
    added = run.apply(_workers(tmp_path, 2, tag="v2", extra=labelled), timeout=180)
    assert added.result == "applied", added.record
    assert run.handle("extra").work(1)["id"] == 99
    extra_pid = _pids(run, ["extra"])["extra"]
    assert _host_of(ssh_hosts, extra_pid) == "topo-h3" == run.launcher.state.location("extra")
    assert _calls_go_on(run, 50)["errors"] == []


def test_a_change_no_host_can_take_is_refused_and_changes_nothing(
    ssh_hosts: HostSet, topo_launch: Callable[..., RunningProgram], tmp_path: Path
) -> None:
    one_each = {name: {"capacity": 1} for name in ssh_hosts.names}  # 3 executables in all
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml", hosts=one_each)
    run = _launch(topo_launch, _workers(tmp_path, 2), hosts)
    before = _pids(run, ["worker/0", "worker/1", "caller"])
    with pytest.raises(ApplyRefused, match=r"needs room for 1 executable\(s\) on one host"):
        run.apply(_workers(tmp_path, 3))

    # A target module the launcher imports (beside its topology file) but the hosts
    # cannot (their path is the run's): refused, naming the module and the host.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "apply_elsewhere.py").write_text("class Node:\n    pass\n")
    swap = f"""\
name: ssh_apply
nodes:
  worker: {{target: "{NODES}:Worker", count: 1, args: {{worker_id: "${{replica}}"}}}}
  caller: {{target: "{NODES}:Caller", args: {{workers: "@worker"}}}}
  other: {{target: "apply_elsewhere:Node"}}
"""
    (elsewhere / "swap.yaml").write_text(swap)
    with pytest.raises(ApplyRefused, match=r"target module apply_elsewhere does not import on"):
        run.apply(elsewhere / "swap.yaml")
    assert run.launcher.state.generation == 0
    assert sorted(run.launcher.state.nodes) == ["caller", "worker/0", "worker/1"]
    assert _pids(run, list(before)) == before
    assert not (run.run_dir / "changes").exists()
    assert run.handle("caller").stats()["errors"] == []


def test_a_new_node_on_a_host_that_is_lost_restarts_where_there_is_room(
    ssh_hosts: HostSet, topo_launch: Callable[..., RunningProgram], tmp_path: Path
) -> None:
    """A node a change added is placed like any other: when its host is cut off it
    restarts on a live host that fits, and the next change places on live hosts only."""
    from topo.runtime.errors import TopoRuntimeError

    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    run = _launch(topo_launch, _workers(tmp_path, 1), hosts)
    restart = "restart: {policy: on-failure, max_restarts: 3, backoff: {initial_s: 0.1}}"
    extra = 'extra: {target: "' + NODES + ':Worker", args: {worker_id: 99}, ' + restart + "}"
    added = run.apply(_workers(tmp_path, 1, extra=extra), timeout=180)
    assert added.result == "applied", added.record
    victim = run.launcher.state.location("extra")
    first = _pids(run, ["extra"])["extra"]
    assert victim is not None and _host_of(ssh_hosts, first) == victim
    assert victim not in {
        run.launcher.state.location("worker/0"),
        run.launcher.state.location("caller"),
    }
    ssh_hosts.set_link(victim, False)
    try:

        def moved_pid() -> int | None:
            pid = int(run.handle("extra", timeout=2).pid())
            return None if pid == first else pid

        moved = wait_until(
            moved_pid,
            60,
            what="extra restarted on another host",
            errors=(TopoRuntimeError,),
            every=0.2,
        )
        assert _host_of(ssh_hosts, moved) not in (None, victim)
        assert run.launcher.state.location("extra") == _host_of(ssh_hosts, moved)
        grown = run.apply(_workers(tmp_path, 2, extra=extra), timeout=180)
        assert grown.result == "applied", grown.record
        assert run.launcher.state.location("worker/1") not in (None, victim)  # a live host
        assert run.handle("caller").stats()["errors"] == []
        assert run.exit_code is None
    finally:
        ssh_hosts.set_link(victim, True)
    assert run.stop(timeout=90) == 0


def test_topo_apply_changes_a_detached_run_across_hosts(ssh_hosts: HostSet, tmp_path: Path) -> None:
    """The command line: ``topo apply RUN FILE`` on a run started with ``topo run -d -b
    ssh`` grows a spread group onto hosts of its own, refuses what no host can take (exit
    1, the group's ``file:line``), and ``topo stop`` leaves nothing on any host."""
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml", workdir=str(ROOT))  # tests.* imports
    one = _workers(tmp_path, 1, spread=True)
    run_id, run_dir = run_detached(tmp_path, str(one), "-b", "ssh", "--hosts", str(hosts))
    try:
        _grow_and_refuse(tmp_path, run_id, run_dir)
    finally:
        pids = run_pids(run_dir)
        stopped = topo("stop", run_id, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert not wait_gone(pids, 20)
    assert not wait_no_strays(ssh_hosts, 10)


def _grow_and_refuse(tmp_path: Path, run_id: str, run_dir: Path) -> None:
    grown = topo(
        "apply", run_id, str(_workers(tmp_path, 3, spread=True)), cwd=tmp_path, timeout=240
    )
    assert grown.returncode == 0, grown.stdout + grown.stderr
    assert "+ worker/1, worker/2" in grown.stdout and "change 1 applied" in grown.stderr
    nodes = {n["id"]: n for n in status(run_dir)["nodes"]}
    assert len({nodes[f"worker/{i}"]["host"] for i in range(3)}) == 3  # a host each
    refused = topo("apply", run_id, str(_workers(tmp_path, 4, spread=True)), cwd=tmp_path)
    assert refused.returncode == 1
    said = refused.stdout + refused.stderr
    assert "Traceback" not in said and "sets resources.spread" in said and ".yaml:" in said
    assert status(run_dir)["generation"] == 1
