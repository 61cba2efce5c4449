"""Whole-group references in the IR (``GroupRef``): what the compiler makes of
``"@group"``, how they travel as JSON, how the diff treats a change of their members,
and how a new packing keeps a running program's processes (``keep_running``)."""

from __future__ import annotations

import pickle
from pathlib import Path

from topo.api import load
from topo.ir import Executable, GroupRef, Program, Ref, dumps, freeze, loads
from topo.ir.diff import diff_programs
from topo.ir.diff_printer import format_diff
from topo.ir.packing import as_applied, keep_running

TEXT = """\
name: demo
params:
  n: {default: 2}
  per: {default: 1}
nodes:
  worker:
    target: pkg.mod:Worker
    count: ${n}
    colocate: {per_process: "${per}"}
  boss:
    target: pkg.mod:Boss
    args: {all: "@worker", star: "@worker[*]", one: "@worker[0]", nested: {w: ["@worker"]}}
"""


def _compile(tmp_path: Path, *params: str) -> Program:
    path = tmp_path / f"t{len(list(tmp_path.glob('*.yaml')))}.yaml"
    path.write_text(TEXT)
    return load(path, list(params)).program


def test_whole_group_references_compile_to_group_refs(tmp_path: Path) -> None:
    boss = _compile(tmp_path, "n=3").node("boss")
    refs = (Ref("worker/0"), Ref("worker/1"), Ref("worker/2"))
    assert isinstance(boss.args["all"], GroupRef) and boss.args["all"].group == "worker"
    assert boss.args["all"] == refs and boss.args["star"] == GroupRef("worker", refs)
    assert boss.args["one"] == Ref("worker/0")  # one replica stays a plain reference
    assert isinstance(boss.args["nested"]["w"][0], GroupRef)


def test_group_refs_survive_json_pickle_and_freeze(tmp_path: Path) -> None:
    program = _compile(tmp_path, "n=2")
    again = loads(dumps(program))
    assert again == program
    value = again.node("boss").args["all"]
    assert isinstance(value, GroupRef) and value.nodes == ("worker/0", "worker/1")
    assert pickle.loads(pickle.dumps(value)) == value and freeze(value) is value
    assert '"$group": "worker"' in dumps(program)
    assert GroupRef("a", ()) != GroupRef("b", ())  # the group is part of the value
    assert hash(GroupRef("a", (Ref("a/0"),))) == hash(GroupRef("a", (Ref("a/0"),)))


def test_a_program_of_ir_version_3_still_reads(tmp_path: Path) -> None:
    text = dumps(_compile(tmp_path)).replace('"version": 4', '"version": 3', 1)
    old = loads(text)
    assert old.version == 3 and old.node("boss").args["one"] == Ref("worker/0")


def test_members_of_a_whole_group_handle_change_without_a_restart(tmp_path: Path) -> None:
    old, new = _compile(tmp_path, "n=2"), _compile(tmp_path, "n=5")
    found = diff_programs(old, new)
    assert found.start == ("worker/2", "worker/3", "worker/4")
    assert found.restart == ()  # boss follows the group: nothing restarts
    boss = next(n for g in found.groups for n in g.nodes if n.node == "boss")
    assert {c.path for c in boss.changes} == {"all", "star", "nested.w[0]"}
    assert all(not c.needs_restart and c.via == "group" for c in boss.changes)
    assert "all: @worker ×2 → ×5 (+worker/2..4)  (members follow, no restart)" in format_diff(found)


def test_a_whole_group_handle_changed_into_a_list_restarts_its_holder(tmp_path: Path) -> None:
    old = _compile(tmp_path, "n=2")
    path = tmp_path / "list.yaml"
    path.write_text(TEXT.replace('all: "@worker"', 'all: ["@worker[0]"]'))
    found = diff_programs(old, load(path, ["n=2"]).program)
    assert found.restart == ("boss",)
    (change,) = [c for g in found.groups for n in g.nodes for c in n.changes if c.path == "all"]
    assert change.needs_restart and change.via != "group"


def _exe(id_: str, *nodes: str, mode: str = "replicas") -> Executable:
    return Executable(id_, nodes, mode)  # type: ignore[arg-type]


def test_keep_running_starts_only_what_is_new_packed_among_itself() -> None:
    running = [
        _exe("boss", "boss", mode="single"),
        _exe("worker/0-1", "worker/0", "worker/1"),
        _exe("worker/2", "worker/2"),
    ]
    fresh = [  # what a compile of 7 replicas, 2 per process, gives
        _exe("boss", "boss", mode="single"),
        _exe("worker/0-1", "worker/0", "worker/1"),
        _exe("worker/2-3", "worker/2", "worker/3"),
        _exe("worker/4-5", "worker/4", "worker/5"),
        _exe("worker/6", "worker/6"),
    ]
    kept = keep_running(running, fresh)
    assert [e.id for e in kept] == ["boss", "worker/0-1", "worker/2", "worker/3-4", "worker/5-6"]
    down = keep_running(running, fresh[:2])  # back to 2 replicas: the chunk of 2 stays
    assert [e.id for e in down] == ["boss", "worker/0-1"]


def test_keep_running_repacks_a_group_whose_per_process_changed() -> None:
    running = [
        _exe("worker/0-1", "worker/0", "worker/1"),
        _exe("worker/2-3", "worker/2", "worker/3"),
    ]
    fresh = [_exe("worker/0-3", "worker/0", "worker/1", "worker/2", "worker/3")]
    assert keep_running(running, fresh) == fresh


def test_as_applied_moves_each_nodes_executable(tmp_path: Path) -> None:
    running = _compile(tmp_path, "n=3", "per=2")
    new = as_applied(running, _compile(tmp_path, "n=6", "per=2"))
    assert [e.id for e in new.executables] == [
        "worker/0-1",
        "worker/2",
        "worker/3-4",
        "worker/5",
        "boss",
    ]
    assert new.node("worker/3").executable == "worker/3-4"
    found = diff_programs(running, new)
    assert found.restart == () and found.start == ("worker/3", "worker/4", "worker/5")
