"""The graph checks on the IR alone (topo.ir.checks), on groups and executables built
directly: no YAML, no Launchpad program."""

from __future__ import annotations

from typing import Any

from topo.ir import Executable, FrozenMap, Group, Node, Program, RestartPolicy
from topo.ir.checks import Problem, check_graph, check_primaries, check_program


def group(name: str, count: int | None = None, **fields: Any) -> Group:
    """A group of ``count`` replicas (None: a single node, as YAML without count)."""
    size = 1 if count is None else count
    return Group(name, "courier", "m:A", size, singleton=count is None, **fields)


def test_a_well_formed_secondary_is_no_problem() -> None:
    groups = [group("learner"), group("secondary", 2, primary="learner")]
    problems, secondaries = check_primaries(groups)
    assert problems == []
    assert [g.name for g in secondaries["learner"]] == ["secondary"]


def test_each_primary_misuse_is_keyed_by_the_group_and_its_primary_setting() -> None:
    groups = [
        group("pool", 3),
        group("learner"),
        group("off", enabled=False, count=0),
        group("on_pool", primary="pool"),
        group("missing", primary="nobody"),
        group("itself", primary="itself"),
        group("to_off", primary="off"),
        group("second", primary="learner"),
        group("third", primary="second"),
        group("ignored", enabled=False, count=0, primary="nobody"),
    ]
    problems, secondaries = check_primaries(groups)
    assert [(p.group, p.setting) for p in problems] == [
        (name, ("primary",)) for name in ("on_pool", "missing", "itself", "to_off", "third")
    ]
    messages = [p.message for p in problems]
    assert messages == [
        "group 'on_pool': primary 'pool' must be a single node (no count)",
        "group 'missing': primary '@nobody' does not exist",
        "group 'itself' cannot be its own primary",
        "group 'to_off': its primary 'off' is disabled",
        "group 'third': primary 'second' is itself a secondary of 'learner'",
    ]
    assert problems[4].hint == "point 'third' at 'learner' directly"
    assert list(secondaries) == ["learner"]  # only the well-formed one follows


def test_a_primary_with_secondary_nodes_cannot_share_a_thread_set() -> None:
    groups = [group("learner"), group("secondary", 2, primary="learner"), group("replay")]
    exe = Executable("core", ("learner", "replay"), "set")
    [problem] = check_graph(groups, [exe])
    assert problem.executable == "core" and problem.group == "learner"
    assert problem.message.startswith(
        "'learner' is thread-colocated with replay in 'core', but it has 2 secondary node(s) "
        "in secondary"
    )
    # No secondary nodes (count 0), or the primary alone in its process: fine.
    none = [group("learner"), group("secondary", 0, primary="learner"), group("replay")]
    assert check_graph(none, [exe]) == []
    assert check_graph(groups, [Executable("learner", ("learner",), "set")]) == []
    # Packed replicas are not a thread set of groups: not this check's business.
    assert check_graph(groups, [Executable("core", ("learner", "replay"), "replicas")]) == []


def test_groups_in_one_thread_set_share_a_restart_policy() -> None:
    always = RestartPolicy("always")
    groups = [group("a", restart=always), group("b"), group("c", restart=always)]
    [problem] = check_graph(groups, [Executable("a+b", ("a", "b"), "set")])
    assert problem == Problem(
        "the groups in 'a+b' (a, b) have different restart policies, but they share one "
        "process and restart together",
        "give them the same restart: settings",
        executable="a+b",
    )
    assert check_graph(groups, [Executable("a+c", ("a", "c"), "set")]) == []


def test_check_program_checks_a_whole_program() -> None:
    groups = (group("a"), group("b", primary="a"), group("c", primary="b"))
    nodes = tuple(Node(g.name, g.name, 0, FrozenMap(), 0, g.name) for g in groups)
    exes = tuple(Executable(g.name, (g.name,)) for g in groups)
    program = Program("p", 0, FrozenMap(), groups, nodes, (), exes)
    [problem] = check_program(program)
    assert problem.group == "c" and "itself a secondary of 'a'" in problem.message
