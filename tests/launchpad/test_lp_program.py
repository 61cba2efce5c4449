"""Building Launchpad programs: groups, labels, handles, what is refused (no launch)."""

from __future__ import annotations

from unittest import mock

import pytest
from lp_nodes import Echo, Pair, Value, noop

import topo.launchpad as lp


def test_add_node_with_labels_and_groups() -> None:
    program = lp.Program("build")
    foo, bar = lp.CourierNode(Echo), lp.CourierNode(Echo)
    program.add_node(foo, "foo")
    program.add_node(bar, label="bar")
    with program.group("baz"):
        baz = [lp.CourierNode(Echo), lp.PyNode(noop)]
        for node in baz:
            program.add_node(node)
        assert program.current_group == "baz"
    with program.group("foo"):  # a group can be reopened, and its label repeated
        again = lp.CourierNode(Echo)
        program.add_node(again, label="foo")
    assert program.groups == {"foo": [foo, again], "bar": [bar], "baz": baz}
    assert program.get_all_nodes() == [foo, again, bar, *baz]
    assert program.name == "build"


def test_add_node_returns_a_handle_to_the_node() -> None:
    program = lp.Program("handles")
    node = lp.CourierNode(Echo)
    handle = program.add_node(node, label="echo")
    assert isinstance(handle, lp.Handle)
    assert handle.node is node
    with pytest.raises(AttributeError, match="dereference"):
        handle.ping  # noqa: B018 - a handle is not a client before launch
    colocation = lp.MultiThreadingColocation([lp.CourierNode(Echo), lp.CourierNode(Echo)])
    assert program.add_node(colocation, label="pair") is None  # a colocation has no handle
    assert program.groups["pair"] == [colocation]


# Launchpad's texts (launchpad/program.py, program_test.py): users' tests match them.
@pytest.mark.parametrize("label", [None, ""])
def test_a_node_needs_a_label(label: str | None) -> None:
    with pytest.raises(ValueError, match=r"^Label should not be empty\."):
        lp.Program("p").add_node(lp.CourierNode(Echo), label=label)


def test_group_errors_are_launchpads() -> None:
    program = lp.Program("p")
    with pytest.raises(ValueError, match=r"^Label should not be empty\."):
        with program.group(""):
            pass
    with pytest.raises(
        ValueError, match=r"^The given label does not match the current group: bar vs foo\."
    ):
        with program.group("foo"):
            program.add_node(lp.CourierNode(Echo), label="bar")
    with pytest.raises(ValueError, match=r"^group\(\) cannot be nested\."):
        with program.group("foo"):
            with program.group("bar"):
                pass
    with pytest.raises(ValueError, match=r"^Current group is only available in group context\."):
        program.current_group  # noqa: B018
    with pytest.raises(TypeError, match="takes a node"):
        program.add_node(Echo, label="x")  # type: ignore[arg-type]
    # After each error the program is usable again: no group is left open.
    node = lp.CourierNode(Echo)
    program.add_node(node, label="ok")
    assert program.groups == {"ok": [node]}


def test_a_duplicated_label_adds_to_its_group() -> None:
    program = lp.Program("p")
    nodes = [lp.CourierNode(Echo) for _ in range(4)]
    program.add_node(nodes[0], "foo")
    program.add_node(nodes[1], "foo")
    with program.group("bar"):
        program.add_node(nodes[2])
    with program.group("bar"):
        program.add_node(nodes[3])
    assert program.groups == {"foo": nodes[:2], "bar": nodes[2:]}


def test_the_same_node_twice_is_refused() -> None:
    program = lp.Program("p")
    node = lp.CourierNode(Echo)
    program.add_node(node, label="a")
    # Launchpad accepts this (and would run the node twice); topo refuses, with a ValueError
    # as Launchpad's other construction errors are.
    with pytest.raises(ValueError, match=r"CourierNode\(Echo\) was added to the program twice"):
        program.add_node(node, label="b")
    with pytest.raises(ValueError, match="twice"):
        program.add_node(lp.MultiThreadingColocation([node]), label="c")
    assert program.groups == {"a": [node]}


def test_make_program_labels_each_node() -> None:
    a, b = lp.CourierNode(Echo), lp.PyNode(noop)
    program = lp.make_program(a, b, name="made")
    assert program.name == "made"
    assert program.groups == {"node_0": [a], "node_1": [b]}


def test_labels_that_are_not_group_names_keep_their_label() -> None:
    program = lp.Program("labels")
    program.add_node(lp.CourierNode(Echo), label="my learner")
    with program.group("actors/cpu"):
        program.add_node(lp.CourierNode(Echo))
        program.add_node(lp.CourierNode(Echo))
    ir = lp.compile_program(program).program
    assert [(g.name, g.label) for g in ir.groups] == [
        ("my_learner", "my learner"),
        ("actors_cpu", "actors/cpu"),
    ]
    assert [n.id for n in ir.nodes] == ["my_learner", "actors_cpu/0", "actors_cpu/1"]


def test_positional_arguments_and_handles_become_edges() -> None:
    program = lp.Program("edges")
    left = program.add_node(lp.CourierNode(Value, 1), label="left")
    right = program.add_node(lp.CourierNode(Value, value=2), label="right")
    program.add_node(lp.CourierNode(Pair, left, right, scale=3), label="pair")
    ir = lp.compile_program(program).program
    pair = ir.node_index["pair"]
    assert dict(pair.args)["scale"] == 3
    assert {(e.src, e.dst) for e in ir.edges} == {("pair", "left"), ("pair", "right")}


def test_constructor_signature_mismatch_names_the_node() -> None:
    program = lp.Program("bad")
    program.add_node(lp.CourierNode(Pair, 1), label="pair")
    with pytest.raises(lp.ProgramError, match=r"node pair \(CourierNode\(Pair\)\).*right"):
        lp.compile_program(program)


def test_a_handle_to_a_node_outside_the_program() -> None:
    program = lp.Program("stray")
    stray = lp.CourierNode(Value, 1).create_handle()
    program.add_node(lp.CourierNode(Pair, stray, stray), label="pair")
    with pytest.raises(lp.ProgramError, match="never added to the program"):
        lp.compile_program(program)


def test_unsupported_options_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="courier_kwargs"):
        lp.CourierNode(Echo, courier_kwargs={"compress": True})
    with pytest.raises(ValueError, match="call_timeout must be a positive"):
        lp.CourierNode(Echo, courier_client_kwargs={"call_timeout": -1})
    with pytest.raises(ValueError, match="interpreter"):
        lp.PythonProcess(interpreter="/usr/bin/python3")
    with pytest.raises(ValueError, match="launch type 'vertex_ai'"):
        lp.launch(lp.make_program(lp.PyNode(noop)), launch_type="vertex_ai")


def test_reverb_and_cacher_nodes_compile_to_their_kinds() -> None:
    program = lp.Program("kinds")
    replay = program.add_node(lp.ReverbNode(noop), label="replay")
    learner = program.add_node(lp.CourierNode(Echo, replay), label="learner")
    assert learner is not None
    program.add_node(lp.CacherNode(learner, refresh_interval_ms=500), label="cache")
    ir = lp.compile_program(program).program
    assert [g.kind for g in ir.groups] == ["reverb", "courier", "cacher"]
    assert dict(ir.node_index["replay"].args)["tables"] == "lp_nodes:noop"
    assert dict(ir.node_index["cache"].args)["refresh_ms"] == 500
    with pytest.raises(ValueError, match="checkpoint_ctor"):
        lp.ReverbNode(noop, checkpoint_ctor=noop)
    with pytest.raises(TypeError, match="needs a handle"):
        lp.CacherNode(Echo)  # type: ignore[arg-type]


def test_any_object_with_create_handle_is_kept_as_launchpad_does() -> None:
    """Launchpad's program is a plain container: its own tests add mock nodes. topo keeps
    them too, refuses them only at launch, and checks labels first as Launchpad does."""
    program = lp.Program("mocks")
    with pytest.raises(ValueError, match=r"^Label should not be empty\."):
        program.add_node(Echo)  # type: ignore[arg-type] -- the label is checked first
    foo, bar = mock.Mock(), mock.Mock()
    assert program.add_node(foo, "foo") is foo.create_handle.return_value
    with program.group("bar"):
        program.add_node(bar)
    assert program.groups == {"foo": [foo], "bar": [bar]}
    assert program.get_all_nodes() == [foo, bar]
    with pytest.raises(ValueError, match="was added to the program twice"):
        program.add_node(foo, "again")
    with pytest.raises(TypeError, match="takes a node"):
        program.add_node(Echo, label="x")  # type: ignore[arg-type] -- no create_handle
    with pytest.raises(lp.ProgramError, match=r"group 'foo' holds <Mock .*not a Launchpad node"):
        lp.compile_program(program)
