"""Compile-stage behaviour: references, round-robin, colocation, seeds, overrides, checks."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from topo.compile import compile_spec
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Edge, Ref
from topo.ir.seeds import key_data
from topo.loader import load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "topologies"

# --- references ----------------------------------------------------------------------------

REFS = """
name: t
params: {n: 3, on: false}
nodes:
  single: {target: m:S}
  one: {target: m:O, count: 1}
  many: {target: m:M, count: "${n}"}
  off: {target: m:X, enabled: "${on}"}
  user:
    target: m:U
    args:
      single: "@single"
      one: "@one"
      many: "@many"
      second: "@many[1]"
      all: "@many[*]"
      maybe: "@off?"
      nested: {deep: ["@single", "@@literal", 4]}
"""


def test_reference_forms(compile_text: Any) -> None:
    program = compile_text(REFS)
    args = program.node("user").args
    assert args["single"] == Ref("single")
    assert args["one"] == (Ref("one/0"),)  # with count (even 1) a list of handles
    assert args["many"] == (Ref("many/0"), Ref("many/1"), Ref("many/2"))
    assert args["second"] == Ref("many/1")
    assert args["all"] == args["many"]
    assert args["maybe"] is None
    assert args["nested"]["deep"] == (Ref("single"), "@literal", 4)
    user_edges = {(e.dst, e.arg) for e in program.edges if e.src == "user"}
    assert ("many/2", "many[2]") in user_edges
    assert ("single", "nested.deep[0]") in user_edges
    assert not any(e.dst.startswith("off") for e in program.edges)


def test_singleton_node_ids(compile_text: Any) -> None:
    program = compile_text(REFS)
    assert [n.id for n in program.nodes_of("single")] == ["single"]
    assert [n.id for n in program.nodes_of("one")] == ["one/0"]
    assert program.group_index["off"].count == 0 and not program.group_index["off"].enabled
    assert program.nodes_of("off") == ()


def test_reference_to_a_missing_group(errors_of: Any) -> None:
    f = errors_of(REFS.replace('"@single"', '"@singel"', 1))
    assert "'@singel' refers to group 'singel', which does not exist" in f.headline
    assert f.hint() == "did you mean 'single'?"
    assert f.where() == ("topology.yaml", 11, 15)


def test_replica_index_out_of_range(errors_of: Any) -> None:
    f = errors_of(REFS.replace('"@many[1]"', '"@many[3]"'))
    assert "'@many[3]' is out of range: group 'many' has replicas 0..2" in f.headline
    assert f.where() == ("topology.yaml", 14, 15)


def test_replica_index_out_of_range_after_override(errors_of: Any) -> None:
    f = errors_of(REFS, "n=1")
    assert "'@many[1]' is out of range: group 'many' has replicas 0..0" in f.headline


def test_non_numeric_index(errors_of: Any) -> None:
    f = errors_of(REFS.replace('"@many[1]"', '"@many[x]"'))
    assert "the replica index must be a number, got 'x'" in f.headline


def test_reference_to_a_disabled_group_is_an_error(errors_of: Any) -> None:
    f = errors_of(REFS.replace('"@off?"', '"@off"'))
    assert "'@off' refers to group 'off', which is disabled" in f.headline
    assert f.hint() == "write '@off?' to pass null when it is disabled"
    assert f.where() == ("topology.yaml", 16, 14)


def test_optional_reference_to_an_enabled_group(compile_text: Any) -> None:
    program = compile_text(REFS, "on=true")
    assert program.node("user").args["maybe"] == Ref("off")
    assert program.group_index["off"].enabled


def test_malformed_reference(errors_of: Any) -> None:
    f = errors_of(REFS.replace('"@single"', '"@single x"', 1))
    assert "'@single x' is not a valid reference" in f.headline
    assert "'@@text' for a literal string" in f.hint()


def test_self_reference(errors_of: Any) -> None:
    f = errors_of("name: t\nnodes:\n  a:\n    target: m:A\n    args: {me: '@a'}\n")
    assert "node 'a' refers to itself in argument 'me'" in f.headline
    assert f.where() == ("topology.yaml", 5, 16)


def test_reference_computed_by_an_expression(compile_text: Any) -> None:
    program = compile_text(
        "name: t\nnodes:\n  a: {target: m:A, count: 2}\n"
        "  b:\n    target: m:B\n    count: 2\n    args: {peer: '@a[${replica}]'}\n"
    )
    assert [n.args["peer"] for n in program.nodes_of("b")] == [Ref("a/0"), Ref("a/1")]


# --- optional groups -----------------------------------------------------------------------


def test_enabled_from_an_unset_param(compile_text: Any) -> None:
    text = (EXAMPLES / "acme_distributed.yaml").read_text()
    program = compile_text(text, "max_actor_steps=null")  # the example's default is set
    assert not program.group_index["steps_limiter"].enabled
    assert program.nodes_of("steps_limiter") == ()
    with_limit = compile_text(text, "max_actor_steps=100")
    [limiter] = with_limit.nodes_of("steps_limiter")
    assert limiter.args["max_steps"] == 100
    assert limiter.args["counter"] == Ref("counter")


def test_enabled_takes_truthiness(compile_text: Any) -> None:
    text = (
        "name: t\nparams: {k: 0}\nnodes:\n  a: {target: m:A, enabled: '${k}'}\n  b: {target: m:B}\n"
    )
    assert not compile_text(text).group_index["a"].enabled
    assert compile_text(text, "k=2").group_index["a"].enabled


# --- round robin ---------------------------------------------------------------------------

RR = """
name: t
params: {n: 7, l2: 2, caches: 0}
nodes:
  learner: {target: m:L}
  learner2: {target: m:L, count: "${l2}"}
  cache: {kind: cacher, count: "${caches}", source: "@learner"}
  actor:
    target: m:A
    count: "${n}"
    colocate: {per_process: 3}
    args:
      by_replica: {round_robin: ["@learner", "@learner2"]}
      by_process: {round_robin: ["@learner", "@learner2"], per: process}
      cached: {round_robin: ["@cache"], fallback: ["@learner"]}
"""


def test_round_robin_per_replica_cycles_over_the_pool(compile_text: Any) -> None:
    program = compile_text(RR)
    pool = ["learner", "learner2/0", "learner2/1"]
    got = [n.args["by_replica"].node for n in program.nodes_of("actor")]
    assert got == [pool[i % 3] for i in range(7)]
    rr_edges = [e for e in program.edges if e.arg == "by_replica"]
    assert {e.via for e in rr_edges} == {"round_robin"}
    assert [e.dst for e in rr_edges] == got


def test_round_robin_per_process(compile_text: Any) -> None:
    program = compile_text(RR)
    exes = [e for e in program.executables if e.nodes[0].startswith("actor/")]
    assert [e.nodes for e in exes] == [
        ("actor/0", "actor/1", "actor/2"),
        ("actor/3", "actor/4", "actor/5"),
        ("actor/6",),
    ]
    pool = ["learner", "learner2/0", "learner2/1"]
    for p, exe in enumerate(exes):
        sources = {program.node(n).args["by_process"].node for n in exe.nodes}
        assert sources == {pool[p % 3]}, exe.id


def test_fallback_when_the_pool_is_empty(compile_text: Any) -> None:
    program = compile_text(RR)
    assert {n.args["cached"] for n in program.nodes_of("actor")} == {Ref("learner")}
    assert {e.via for e in program.edges if e.arg == "cached"} == {"fallback"}
    with_caches = compile_text(RR, "caches=2")
    got = [n.args["cached"].node for n in with_caches.nodes_of("actor")]
    assert got == [f"cache/{i % 2}" for i in range(7)]
    assert {e.via for e in with_caches.edges if e.arg == "cached"} == {"round_robin"}


def test_mava_fallback_gives_executors_the_trainer(compile_path: Any) -> None:
    mava = EXAMPLES / "mava_dial.yaml"
    program = compile_path(mava, ["num_caches=0", "num_executors=3"])
    assert program.nodes_of("cacher") == ()
    assert [n.args["variable_source"] for n in program.nodes_of("executor")] == [Ref("trainer")] * 3
    assert Edge("executor/1", "trainer", "variable_source", "fallback") in program.edges
    default = compile_path(mava)
    assert [n.args["variable_source"] for n in default.nodes_of("executor")] == [
        Ref("cacher/0")
    ] * 2
    assert Edge("cacher/0", "trainer", "source", "source") in default.edges


def test_empty_round_robin_without_fallback(errors_of: Any) -> None:
    f = errors_of(RR.replace("l2: 2", "l2: 0").replace('"@learner", "@learner2"', '"@learner2"'))
    assert "round_robin has nothing to choose from" in f.diagnostics[0].message
    assert "add a fallback" in f.hint()
    assert f.where() == ("topology.yaml", 12, 33)


def test_empty_round_robin_and_empty_fallback(errors_of: Any) -> None:
    f = errors_of(RR.replace('fallback: ["@learner"]', 'fallback: ["@cache"]'))
    assert "every pool is empty or disabled and so is the fallback" in f.headline


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            '{round_robin: ["@learner"], per: host}',
            "round_robin per must be 'replica' or 'process'",
        ),
        ('{round_robin: ["@learner"], each: 1}', "unknown key 'each' in round_robin"),
        ("{round_robin: [learner]}", "pool entries must be references like '@learner'"),
        ("{round_robin: 3}", "a round-robin pool is a list of references"),
        ('{round_robin: ["@nobody"]}', "'@nobody' refers to group 'nobody'"),
    ],
)
def test_round_robin_misuse(errors_of: Any, value: str, message: str) -> None:
    f = errors_of(RR.replace('{round_robin: ["@learner", "@learner2"]}', value, 1))
    assert message in f.text
    assert f.where()[1] == 12


# --- per-replica values --------------------------------------------------------------------


def test_replica_and_seed_in_args(compile_text: Any) -> None:
    program = compile_text(
        """
        name: t
        seed: 42
        nodes:
          a:
            target: m:A
            count: 3
            args:
              i: ${replica}
              key: ${seed.key}
              s: ${seed.int}
              name: "${group}-${replica}-of-${count}"
              me: ${node_id}
        """
    )
    for i, node in enumerate(program.nodes_of("a")):
        assert node.args["i"] == i
        assert node.args["key"] == tuple(key_data(node.seed)) == (0, node.seed)
        assert node.args["s"] == node.seed
        assert node.args["name"] == f"a-{i}-of-3"
        assert node.args["me"] == node.id
    assert program.seed == 42


def test_program_seed_from_param_changes_node_seeds(compile_text: Any) -> None:
    text = "name: t\nparams: {seed: 0}\nnodes:\n  a: {target: m:A, count: 4}\n"
    s0 = [n.seed for n in compile_text(text).nodes]
    s1 = [n.seed for n in compile_text(text, "seed=1").nodes]
    assert s0 == [n.seed for n in compile_text(text).nodes]
    assert len(set(s0)) == 4 and set(s0).isdisjoint(s1)


def test_per_replica_overrides(compile_text: Any) -> None:
    program = compile_text(
        """
        name: t
        nodes:
          learner: {target: m:L}
          actor:
            target: m:A
            count: 4
            args: {epsilon: 0.1, source: "@learner", tag: "r${replica}"}
            overrides:
              "0": {epsilon: 1.0}
              3: {epsilon: 0.001, tag: "last-${replica}"}
        """
    )
    actors = program.nodes_of("actor")
    assert [a.args["epsilon"] for a in actors] == [1.0, 0.1, 0.1, 0.001]
    assert [a.args["tag"] for a in actors] == ["r0", "r1", "r2", "last-3"]
    assert all(a.args["source"] == Ref("learner") for a in actors)


def test_override_out_of_range(errors_of: Any) -> None:
    f = errors_of(
        "name: t\nnodes:\n  a:\n    target: m:A\n    count: 2\n    args: {e: 1}\n"
        "    overrides:\n      5: {e: 2}\n"
    )
    assert "override for replica 5 of group 'a', which has 2 replica(s)" in f.headline
    assert f.where() == ("topology.yaml", 8, 7)


def test_override_of_an_arg_the_group_does_not_pass(errors_of: Any) -> None:
    f = errors_of(
        "name: t\nnodes:\n  a:\n    target: m:A\n    count: 2\n    args: {eps: 1}\n"
        "    overrides:\n      1: {epss: 2}\n"
    )
    assert "override of replica 1 sets 'epss'" in f.headline
    assert f.where() == ("topology.yaml", 8, 11)


def test_override_keys_must_be_indices(errors_of: Any) -> None:
    f = errors_of(
        "name: t\nnodes:\n  a:\n    target: m:A\n    count: 2\n    overrides:\n      first: {}\n"
    )
    assert "keyed by replica index, got 'first'" in f.headline
    assert f.where() == ("topology.yaml", 7, 7)


# --- colocation ----------------------------------------------------------------------------


def test_node_in_two_colocation_sets(errors_of: Any) -> None:
    f = errors_of(
        """
        name: t
        nodes:
          a: {target: m:A}
          b: {target: m:B}
          c: {target: m:C}
        colocation:
          - nodes: ["@a", "@b"]
          - nodes: ["@c", "@a"]
        """
    )
    assert "node 'a' is in two threads colocation sets ('a+b' and 'c+a')" in f.headline
    assert f.where() == ("topology.yaml", 8, 12)


def test_colocation_of_a_missing_group(errors_of: Any) -> None:
    f = errors_of("name: t\nnodes:\n  a: {target: m:A}\ncolocation:\n  - nodes: ['@a', '@zz']\n")
    assert "'@zz' refers to group 'zz', which does not exist" in f.headline
    assert f.where() == ("topology.yaml", 5, 19)


def test_thread_set_packs_nodes_into_one_executable(compile_text: Any) -> None:
    program = compile_text(
        """
        name: t
        nodes:
          replay: {kind: reverb, tables: m:tables}
          learner: {target: m:L, args: {replay: "@replay"}}
          actor: {target: m:A, count: 2}
        colocation:
          - {name: core, nodes: ["@learner", "@replay"]}
          - {nodes: ["@actor"], mode: host}
        """
    )
    core = program.executable_index["core"]
    assert core.mode == "set" and set(core.nodes) == {"learner", "replay"}
    assert program.node("learner").executable == "core"
    assert {program.executable_index[f"actor/{i}"].placement for i in (0, 1)} == {"actor"}


def test_acme_colocation_with_secondary_learners_is_refused(compile_path: Any) -> None:
    path = EXAMPLES / "acme_distributed.yaml"
    program = compile_path(path, ["colocate_learner_and_replay=true"])  # one learner: fine
    assert set(program.executable_index["learner_replay"].nodes) == {"learner", "replay"}
    with pytest.raises(TopoError) as info:
        compile_path(path, ["colocate_learner_and_replay=true", "num_learners=2"])
    [d] = info.value.diagnostics
    assert "'learner' is thread-colocated with replay in 'learner_replay'" in d.message
    assert "1 secondary node(s) in secondary_learner" in d.message
    line = path.read_text().splitlines().index("  - name: learner_replay") + 1
    assert d.pos is not None and (d.pos.line, d.pos.col) == (line, 3)
    assert d.hint is not None and "num_learners=1" in d.hint


def test_per_process_and_colocation_set_together(errors_of: Any) -> None:
    f = errors_of(
        "name: t\nnodes:\n  a: {target: m:A, count: 2, colocate: {per_process: 2}}\n"
        "  b: {target: m:B}\ncolocation:\n  - nodes: ['@a[0]', '@b']\n"
    )
    assert "packs its replicas with colocate.per_process and also appears" in f.text


def test_colocated_groups_with_different_restart_policies(errors_of: Any) -> None:
    f = errors_of(
        "name: t\nnodes:\n  a: {target: m:A, restart: {policy: always}}\n"
        "  b: {target: m:B}\ncolocation:\n  - nodes: ['@a', '@b']\n"
    )
    assert "have different restart policies" in f.headline


def test_primary_misuse(errors_of: Any) -> None:
    f = errors_of(
        "name: t\nnodes:\n  l: {target: m:L, count: 2}\n  s: {target: m:L, primary: '@l'}\n"
    )
    assert "primary 'l' must be a single node (no count)" in f.headline
    assert f.where() == ("topology.yaml", 4, 29)


# --- kinds ---------------------------------------------------------------------------------


def test_kind_specific_fields(errors_of: Any) -> None:
    f = errors_of("name: t\nnodes:\n  r: {kind: reverb, target: m:R}\n")
    messages = [d.message for d in f.diagnostics]
    assert "group 'r' (kind reverb) needs 'tables'" in messages
    assert "'target' does not apply to group 'r' of kind reverb (it is for kind courier / py)" in (
        messages
    )


def test_courier_needs_a_target(errors_of: Any) -> None:
    f = errors_of("name: t\nnodes:\n  a: {count: 2}\n")
    assert "group 'a' (kind courier) needs 'target'" in f.headline
    assert f.hint() == "add  target: package.module:Class"
    assert f.where() == ("topology.yaml", 3, 3)


# --- --check-imports -----------------------------------------------------------------------


@pytest.fixture
def fake_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pkg = tmp_path / "pkgs"
    pkg.mkdir()
    (pkg / "topo_fake_ok.py").write_text(
        "class Actor:\n    def __init__(self, x=None):\n        self.x = x\n\n"
        "    def run(self):\n        pass\n\nNOT_CALLABLE = 3\n"
    )
    (pkg / "topo_fake_boom.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(pkg))
    for name in ("topo_fake_ok", "topo_fake_boom"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return pkg


CHECKED = """
name: t
nodes:
  ok: {target: topo_fake_ok:Actor}
  a: {target: %s}
"""


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nonexistent_pkg_xyz.mod:Thing", "cannot import 'nonexistent_pkg_xyz.mod:Thing'"),
        ("topo_fake_ok:Missing", "module 'topo_fake_ok' has no attribute 'Missing'"),
        ("topo_fake_ok:NOT_CALLABLE", "'topo_fake_ok:NOT_CALLABLE' is a int, not something"),
        ("topo_fake_boom:X", "importing 'topo_fake_boom:X' raised RuntimeError: boom at import"),
    ],
)
def test_check_imports_errors(
    write_topo: Any, fake_modules: Path, target: str, message: str
) -> None:
    path = write_topo(CHECKED % target)
    loaded = load_spec(path)
    compile_spec(loaded)  # without --check-imports nothing is imported
    assert "topo_fake_boom" not in sys.modules
    with pytest.raises(TopoError) as info:
        compile_spec(loaded, check_imports=True)
    [d] = info.value.diagnostics
    assert f"group 'a': {message}" in d.message
    assert d.pos is not None and (d.pos.line, d.pos.col) == (4, 15)


def test_check_imports_passes_and_warns_about_unreachable_nodes(
    write_topo: Any, fake_modules: Path
) -> None:
    text = CHECKED.replace("Actor}", "Actor, args: {x: '@a'}}") % "collections:OrderedDict"
    warnings: list[Diagnostic] = []
    program = compile_spec(load_spec(write_topo(text)), check_imports=True, warnings=warnings)
    assert len(program.nodes) == 2
    assert warnings == []  # ok has run(); a has no run() but ok holds a handle to it
    path2 = write_topo("name: t\nnodes:\n  idle: {target: collections:OrderedDict}\n", "u.yaml")
    compile_spec(load_spec(path2), check_imports=True, warnings=warnings)
    assert [d.severity for d in warnings] == ["warning"]
    assert "nothing holds a handle to it" in warnings[0].message


# --- regressions found by the mutation corpus ----------------------------------------------


def test_references_in_a_disabled_group_are_still_checked(errors_of: Any) -> None:
    text = (EXAMPLES / "acme_distributed.yaml").read_text()
    saver = '      variable_source: "@learner"\ncolocation'
    f = errors_of(text.replace(saver, saver.replace("@learner", "@learnerx")))
    assert "'@learnerx' refers to group 'learnerx', which does not exist" in f.headline
    line = text[: text.index(saver)].count("\n") + 1
    assert f.where() == ("topology.yaml", line, 24)  # in model_saver, disabled by default
    f = errors_of(
        text.replace(
            'counter: "@counter"\n      max_steps', 'counter: "@counter[3]"\n      max_steps'
        )
    )
    assert "'@counter[3]' is out of range" in f.headline


def test_a_disabled_group_may_refer_to_another_disabled_group(compile_text: Any) -> None:
    program = compile_text(
        """
        name: t
        params: {on: false}
        nodes:
          a: {target: m:A, enabled: "${on}"}
          b:
            target: m:B
            enabled: "${on}"
            args: {a: "@a", rr: {round_robin: ["@a"]}}
        """
    )
    assert program.nodes == () and program.edges == ()


def test_an_unused_fallback_is_still_checked(errors_of: Any) -> None:
    text = (EXAMPLES / "mava_dial.yaml").read_text()
    f = errors_of(text.replace('fallback: ["@trainer"]', 'fallback: ["@trainr"]'))
    assert "'@trainr' refers to group 'trainr', which does not exist" in f.headline
    assert f.hint() == "did you mean 'trainer'?"
