"""``topo.ir.diff``: two compiled programs compared structurally, each kind of change
printed as a plan (asserted line for line) and carried in the typed diff ``topo apply``
reads (start / stop / restart, each change's ``needs_restart``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from topo.api import load
from topo.ir import Program, RpcSettings, dumps, loads
from topo.ir.diff import Change, GroupDiff, NodeDiff, ProgramDiff, diff_programs
from topo.ir.diff_printer import diff_to_dict, format_diff, node_names
from topo.ir.values import Ref

BASE = """\
name: demo
params:
  n: {default: 2}
  learners: {default: 2}
  lr: {default: 0.1}
nodes:
  learner:
    target: pkg.mod:Learner
    count: ${learners}
    args: {config: {lr: "${lr}", depth: 3}}
  actor:
    target: pkg.mod:Actor
    count: ${n}
    description: acts
    resources: {env: {A: "1"}}
    restart: {policy: on-failure}
    args:
      source: {round_robin: ["@learner"]}
      sources: ["@learner[0]", "@replay"]
      tag: a
  replay:
    target: pkg.mod:Replay
colocation:
  - name: pair
    nodes: ["@learner[0]", "@replay"]
"""


def compile_text(tmp_path: Path, text: str, *params: str) -> Program:
    """The program a topology text compiles to (a real file, the real compiler)."""
    path = tmp_path / f"t{len(list(tmp_path.glob('*.yaml')))}.yaml"
    path.write_text(text)
    return load(path, list(params)).program


def plan(tmp_path: Path, old: str, new: str, *params: str) -> tuple[ProgramDiff, list[str]]:
    found = diff_programs(compile_text(tmp_path, old, *params), compile_text(tmp_path, new))
    return found, format_diff(found).splitlines()


def test_equal_programs_have_no_differences(tmp_path: Path) -> None:
    program = compile_text(tmp_path, BASE)
    found = diff_programs(program, compile_text(tmp_path, BASE))
    assert found.equal and found == ProgramDiff()
    assert format_diff(found) == "No differences."
    assert diff_to_dict(found)["equal"] is True
    again = loads(dumps(program))  # a run's recorded program equals the compiled one
    assert diff_programs(again, program).equal


def test_a_count_going_up_starts_the_new_replicas(tmp_path: Path) -> None:
    found, lines = plan(tmp_path, BASE, BASE.replace("n: {default: 2}", "n: {default: 5}"))
    assert lines == [
        "~ program",
        "    ~ params.n: 2 → 5",
        "~ group actor  count 2 → 5",
        "    + actor/2..4",
        "Plan: 1 group changed; 3 nodes to start, 0 to restart, 0 to stop.",
    ]
    assert found.start == ("actor/2", "actor/3", "actor/4")
    assert found.stop == found.restart == ()
    [group] = found.groups
    assert group == GroupDiff(
        "actor",
        "~",
        (2, 5),
        (),
        tuple(NodeDiff(f"actor/{i}", "+", "start") for i in (2, 3, 4)),
    )


def test_a_count_going_down_stops_the_replicas_removed(tmp_path: Path) -> None:
    old = BASE.replace("n: {default: 2}", "n: {default: 4}")
    found, lines = plan(tmp_path, old, BASE)
    assert lines == [
        "~ program",
        "    ~ params.n: 4 → 2",
        "~ group actor  count 4 → 2",
        "    - actor/2, actor/3",
        "Plan: 1 group changed; 0 nodes to start, 0 to restart, 2 to stop.",
    ]
    assert found.stop == ("actor/2", "actor/3")


def test_groups_added_and_removed_start_and_stop_all_their_nodes(tmp_path: Path) -> None:
    new = BASE.replace(
        "  replay:\n", "  evaluator:\n    target: pkg.mod:Evaluator\n    count: 2\n  replay:\n"
    )
    _, lines = plan(tmp_path, BASE, new)
    assert lines == [
        "+ group evaluator  count 2",
        "    + evaluator/0, evaluator/1",
        "Plan: 1 group added; 2 nodes to start, 0 to restart, 0 to stop.",
    ]
    back, lines = plan(tmp_path, new, BASE)
    assert lines == [
        "- group evaluator  count 2",
        "    - evaluator/0, evaluator/1",
        "Plan: 1 group removed; 0 nodes to start, 0 to restart, 2 to stop.",
    ]
    assert back.stop == ("evaluator/0", "evaluator/1") and back.start == ()


def test_group_settings_say_old_and_new_and_which_restart_the_replicas(tmp_path: Path) -> None:
    new = (
        BASE.replace("policy: on-failure", "policy: always, max_restarts: 5")
        .replace('env: {A: "1"}', 'env: {A: "2", B: "x"}, cpus: [0, 1]')
        .replace("description: acts", "description: acts more\n    rpc: {threads: 2}")
        .replace("target: pkg.mod:Actor", "target: pkg.mod:Actor2")
    )
    found, lines = plan(tmp_path, BASE, new)
    assert lines == [
        "~ group actor",
        "    ~ target: pkg.mod:Actor → pkg.mod:Actor2  (restarts its replicas)",
        "    ~ restart.policy: on-failure → always",
        "    ~ restart.max_restarts: 3 → 5",
        "    ~ resources.env.A: 1 → 2  (restarts its replicas)",
        "    + resources.env.B: x  (restarts its replicas)",
        "    ~ resources.cpus: null → [0, 1]  (restarts its replicas)",
        "    ~ rpc.threads: 8 → 2  (restarts its replicas)",
        "    ~ description: acts → acts more",
        "Plan: 1 group changed; 0 nodes to start, 2 to restart, 0 to stop.",
    ]
    assert found.restart == ("actor/0", "actor/1")
    [group] = found.groups
    assert group.nodes == ()  # the group's change restarts them; no node of its own changed
    assert Change("restart.policy", "on-failure", "always") in group.changes


def test_supervision_settings_alone_restart_nothing(tmp_path: Path) -> None:
    new = BASE.replace("policy: on-failure", "policy: never").replace("acts", "the actors")
    found, lines = plan(tmp_path, BASE, new)
    assert lines[-1] == "Plan: 1 group changed; 0 nodes to start, 0 to restart, 0 to stop."
    assert found.restart == () and not any(c.needs_restart for c in found.groups[0].changes)


def test_arguments_changed_by_path_added_and_removed(tmp_path: Path) -> None:
    new = (
        BASE.replace("depth: 3", "depth: 4")
        .replace("tag: a", "extra: [1, 2]")
        .replace('sources: ["@learner[0]", "@replay"]', 'sources: ["@learner[0]", "@learner[1]"]')
    )
    found, lines = plan(tmp_path, BASE, new)
    assert lines == [
        "~ group learner",
        "    ~ learner/0, learner/1  config.depth: 3 → 4",
        "~ group actor",
        "    ~ actor/0, actor/1  sources[1]: @replay → @learner/1  (ref)",
        "    ~ actor/0, actor/1  tag: 'a' → (absent)",
        "    ~ actor/0, actor/1  extra: (absent) → [1, 2]",
        "Plan: 2 groups changed; 0 nodes to start, 4 to restart, 0 to stop.",
    ]
    node = found.groups[1].nodes[0]
    assert node.effect == "restart"
    assert node.changes[1] == Change("tag", "a", None, "-", True)
    assert node.changes[0] == Change(
        "sources[1]", Ref("replay"), Ref("learner/1"), "~", True, "ref"
    )


def test_a_param_shows_once_and_where_it_changes_arguments(tmp_path: Path) -> None:
    found, lines = plan(tmp_path, BASE, BASE, "lr=0.5")
    assert lines == [
        "~ program",
        "    ~ params.lr: 0.5 → 0.1",
        "~ group learner",
        "    ~ learner/0, learner/1  config.lr: 0.5 → 0.1",
        "Plan: 1 group changed; 0 nodes to start, 2 to restart, 0 to stop.",
    ]
    assert found.program == (Change("params.lr", 0.5, 0.1),)


def test_round_robin_wiring_says_which_replica_takes_its_variables_from_where(
    tmp_path: Path,
) -> None:
    old = BASE.replace("n: {default: 2}", "n: {default: 4}")
    new = old.replace("learners: {default: 2}", "learners: {default: 3}")
    found, lines = plan(tmp_path, old, new)
    assert lines == [
        "~ program",
        "    ~ params.learners: 2 → 3",
        "~ group learner  count 2 → 3",
        "    + learner/2",
        "~ group actor",
        "    ~ actor/2  source: @learner/0 → @learner/2  (round_robin)",
        "    ~ actor/3  source: @learner/1 → @learner/0  (round_robin)",
        "Plan: 2 groups changed; 1 node to start, 2 to restart, 0 to stop.",
    ]
    assert found.restart == ("actor/2", "actor/3")


def test_colocation_moves_nodes_between_executables(tmp_path: Path) -> None:
    new = BASE.replace('nodes: ["@learner[0]", "@replay"]', 'nodes: ["@learner[0]", "@learner[1]"]')
    found, lines = plan(tmp_path, BASE, new)
    assert lines == [
        "~ group learner",
        "    ~ learner/0  executable.nodes: [learner/0, replay] → [learner/0, learner/1]",
        "    ~ learner/1  executable: learner/1 → pair",
        "~ group replay",
        "    ~ replay  executable: pair → replay",
        "executables",
        "    ~ pair  nodes: [learner/0, replay] → [learner/0, learner/1]",
        "Plan: 2 groups changed; 0 nodes to start, 3 to restart, 0 to stop.",
    ]
    assert found.restart == ("learner/0", "learner/1", "replay")  # threads are not moved live
    assert [(e.executable, e.op) for e in found.executables] == [
        ("pair", "~"),
        ("replay", "+"),
        ("learner/1", "-"),
    ]


def test_a_program_seed_change_is_said_once_not_per_node(tmp_path: Path) -> None:
    old = BASE.replace("name: demo", "name: demo\nseed: 1").replace("tag: a", "key: ${seed.key}")
    new = old.replace("seed: 1", "seed: 2")
    found, lines = plan(tmp_path, old, new)
    assert lines == [
        "~ program",
        "    ~ seed: 1 → 2",
        "Plan: program settings changed; 0 nodes to start, 5 to restart, 0 to stop.",
    ]
    assert found.program == (Change("seed", 1, 2, "~", True),)


def test_program_settings_stop_and_snapshots(tmp_path: Path) -> None:
    new = BASE.replace("name: demo", "name: demo2\nstop: {grace_s: 9}\nsnapshots: {every_s: 60}")
    found, lines = plan(tmp_path, BASE, new)
    assert lines == [
        "~ program",
        "    ~ name: demo → demo2",
        "    ~ stop.grace_s: 5.0 → 9.0",
        "    ~ snapshots.every_s: null → 60.0",
        "    ~ snapshots.at_stop: false → true",
        "Plan: program settings changed; 0 nodes to start, 0 to restart, 0 to stop.",
    ]
    assert found.restart == ()


def test_a_group_switched_on_starts_its_nodes(tmp_path: Path) -> None:
    on = BASE.replace('"@learner[0]", "@replay"]\n', '"@learner[0]"]\n')  # no set for replay
    off = on.replace("target: pkg.mod:Replay", "target: pkg.mod:Replay\n    enabled: false")
    found, lines = plan(tmp_path, off, on)
    assert lines == [
        "~ group replay  count 0 → 1",
        "    ~ enabled: false → true",
        "    + replay",
        "Plan: 1 group changed; 1 node to start, 0 to restart, 0 to stop.",
    ]
    assert found.start == ("replay",)


def test_a_nodes_own_target_and_positional_arguments(tmp_path: Path) -> None:
    old = compile_text(tmp_path, BASE)
    node = old.node("actor/1")
    changed = dataclasses.replace(node, target="pkg.other:Actor", posargs=(1, "x"))
    new = dataclasses.replace(
        old, nodes=tuple(changed if n.id == "actor/1" else n for n in old.nodes)
    )
    lines = format_diff(diff_programs(old, new)).splitlines()
    assert lines == [
        "~ group actor",
        "    ~ actor/1  target:  → pkg.other:Actor",
        "    ~ actor/1  posargs: [] → [1, 'x']",
        "Plan: 1 group changed; 0 nodes to start, 1 to restart, 0 to stop.",
    ]


def test_the_json_form_is_stable_and_typed(tmp_path: Path) -> None:
    old = compile_text(tmp_path, BASE)
    new = compile_text(tmp_path, BASE, "n=3", "lr=0.2")
    first, second = diff_programs(old, new), diff_programs(old, new)
    assert first == second  # deterministic
    data = diff_to_dict(first)
    assert json.dumps(data) == json.dumps(diff_to_dict(second))
    assert list(data) == ["equal", "program", "groups", "executables", "start", "stop", "restart"]
    assert data["equal"] is False
    assert data["program"][0] == {
        "path": "params.n",
        "op": "~",
        "old": 2,
        "new": 3,
        "needs_restart": False,
        "via": "",
    }
    learner, actor = data["groups"]
    assert learner["nodes"][0]["changes"][0]["path"] == "config.lr"
    assert actor == {
        "group": "actor",
        "op": "~",
        "count": [2, 3],
        "changes": [],
        "nodes": [{"node": "actor/2", "op": "+", "effect": "start", "changes": []}],
    }
    assert data["start"] == ["actor/2"] and data["restart"] == ["learner/0", "learner/1"]


@pytest.mark.parametrize(
    ("ids", "shown"),
    [
        (["a/0", "a/1"], "a/0, a/1"),
        (["a/0", "a/1", "a/2", "a/5", "b"], "a/0..2, a/5, b"),
        (["a/3", "b/4", "b/5", "b/6"], "a/3, b/4..6"),
    ],
)
def test_node_names_shorten_runs_of_replicas(ids: list[str], shown: str) -> None:
    assert node_names(ids) == shown


def test_replicas_packed_into_processes_move_and_restart(tmp_path: Path) -> None:
    packed = "    description: acts\n    colocate: {per_process: 2}"
    new = BASE.replace("    description: acts", packed)
    found, lines = plan(tmp_path, BASE, new)
    assert lines == [
        "~ group actor",
        "    ~ per_process: null → 2  (restarts its replicas)",
        "    ~ actor/0  executable: actor/0 → actor/0-1",
        "    ~ actor/1  executable: actor/1 → actor/0-1",
        "executables",
        "    + actor/0-1  [replicas]  [actor/0, actor/1]",
        "Plan: 1 group changed; 0 nodes to start, 2 to restart, 0 to stop.",
    ]
    assert [(e.executable, e.op) for e in found.executables] == [
        ("actor/0-1", "+"),
        ("actor/0", "-"),
        ("actor/1", "-"),
    ]


def test_a_nodes_own_rpc_disable_run_and_a_handle_rewired_in_place(tmp_path: Path) -> None:
    old = compile_text(tmp_path, BASE)
    node = dataclasses.replace(old.node("actor/0"), rpc=RpcSettings(threads=2), disable_run=True)
    edges = tuple(
        dataclasses.replace(e, via="fallback") if (e.src, e.arg) == ("actor/0", "source") else e
        for e in old.edges
    )
    new = dataclasses.replace(
        old, nodes=tuple(node if n.id == "actor/0" else n for n in old.nodes), edges=edges
    )
    found = diff_programs(old, new)
    assert format_diff(found).splitlines() == [
        "~ group actor",
        "    ~ actor/0  disable_run: false → true",
        "    ~ actor/0  rpc: null → {threads: 2, deadline_s: 60.0, max_message_mb: 512.0, "
        "call_timeout_s: null}",
        "    ~ actor/0  source: @learner/0 → @learner/0  (round_robin → fallback)",
        "Plan: 1 group changed; 0 nodes to start, 1 to restart, 0 to stop.",
    ]
    assert found.restart == ("actor/0",)
