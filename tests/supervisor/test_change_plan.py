"""``topo.supervisor.change_plan``: a change to a running program as actions on its
executables (start, restart, stop), what refuses it, and the registry's tables of groups
and of who holds them whole."""

from __future__ import annotations

from pathlib import Path

from topo.api import load
from topo.ir import Program
from topo.supervisor.change_plan import group_table, holders, plan_change

TEXT = """\
name: NAME
seed: SEED
params:
  n: {default: 2}
  tag: {default: a}
nodes:
  worker:
    target: pkg.mod:Worker
    count: ${n}
    colocate: {per_process: 2}
    args: {tag: "${tag}"}
    rpc: {call_timeout_s: 7}
  boss:
    target: pkg.mod:Boss
    args: {workers: "@worker"}
  other: {target: pkg.mod:Other}
  third: {target: pkg.mod:Other}
colocation:
  - {name: pair, nodes: ["@boss", "@PARTNER"]}
"""


def _program(tmp_path: Path, *params: str, name: str = "demo", seed: int = 1) -> Program:
    text = TEXT.replace("NAME", name).replace("SEED", str(seed))
    partner = next((p.split("=")[1] for p in params if p.startswith("partner=")), "other")
    text = text.replace("PARTNER", partner)
    path = tmp_path / f"t{len(list(tmp_path.glob('*.yaml')))}.yaml"
    path.write_text(text)
    return load(path, [p for p in params if not p.startswith("partner=")]).program


def test_more_replicas_start_new_executables_only(tmp_path: Path) -> None:
    plan = plan_change(_program(tmp_path, "n=3"), _program(tmp_path, "n=7"))
    assert plan.refused == () and plan.restart == () and plan.stop == ()
    assert plan.start == ("worker/3-4", "worker/5-6")  # worker/2 keeps its process alone


def test_fewer_replicas_stop_some_and_restart_a_chunk_that_loses_one(tmp_path: Path) -> None:
    plan = plan_change(_program(tmp_path, "n=4"), _program(tmp_path, "n=3"))
    assert plan.stop == ("worker/2-3",)  # it held worker/3, which goes
    assert plan.start == ("worker/2",)  # worker/2 goes on in a process of its own
    assert plan.restart == ()


def test_a_changed_argument_restarts_every_executable_of_the_group(tmp_path: Path) -> None:
    plan = plan_change(_program(tmp_path, "n=4"), _program(tmp_path, "n=4", "tag=b"))
    assert plan.restart == ("worker/0-1", "worker/2-3") and plan.start == plan.stop == ()


def test_what_cannot_change_live_is_refused(tmp_path: Path) -> None:
    running = _program(tmp_path)
    assert "name changes" in plan_change(running, _program(tmp_path, name="x")).refused[0]
    assert "seed changes" in plan_change(running, _program(tmp_path, seed=2)).refused[0]
    moved = plan_change(running, _program(tmp_path, "partner=third"))
    assert any("thread colocation set 'pair' would change in place" in r for r in moved.refused)
    said = plan_change(running, _program(tmp_path, "n=3"), ["no host has room for worker/2"])
    assert said.refused == ("no host has room for worker/2",)
    assert plan_change(running, _program(tmp_path)).empty


def test_the_registry_tables_list_live_members_and_whole_group_holders(tmp_path: Path) -> None:
    old, new = _program(tmp_path, "n=2"), _program(tmp_path, "n=4")
    live = {"worker/0", "worker/1", "worker/3"}  # worker/2 not ready yet
    table = group_table([old, new], live)
    assert table["worker"] == (
        ("worker/0", "courier", 7.0),
        ("worker/1", "courier", 7.0),
        ("worker/3", "courier", 7.0),
    )
    assert holders([old, new]) == {"pair": frozenset({"worker"})}  # boss runs in "pair"
