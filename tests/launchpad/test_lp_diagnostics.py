"""Errors in Launchpad programs as diagnostics: each at the file, line and column of the
``add_node`` call that added the node at fault, as a YAML error points at the YAML."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest
from lp_nodes import Echo, Pair, Value

import topo.launchpad as lp
from topo.diagnostics import SourcePos, TopoError
from topo.ir.checks import check_program

HERE = Path(__file__).resolve()


def site(marker: str) -> SourcePos:
    """Where the line holding ``# marker`` calls add_node (or make_program) in this file."""
    lines = HERE.read_text().splitlines()
    [index] = [i for i, text in enumerate(lines) if text.endswith(f"# {marker}")]
    text = lines[index]
    col = text.index("program.add_node") if "program.add_node" in text else text.index("lp.")
    return SourcePos(str(HERE), index + 1, col + 1)


def error_of(program: lp.Program) -> lp.ProgramError:
    with pytest.raises(lp.ProgramError) as info:
        lp.compile_program(program)
    return info.value


def test_a_constructor_that_cannot_bind_is_placed_at_its_add_node() -> None:
    program = lp.Program("bad")
    value = program.add_node(lp.CourierNode(Value, 1), label="value")
    program.add_node(lp.CourierNode(Pair, value), label="pair")  # bind
    error = error_of(program)
    [d] = error.diagnostics
    assert d.pos == site("bind")
    assert d.message == "node pair (CourierNode(Pair)): Pair() missing a required argument: 'right'"
    # Still the ValueError Launchpad users catch, its message still what they match on,
    # now with the position in front.
    assert isinstance(error, ValueError) and isinstance(error, TopoError)
    assert str(error) == f"{site('bind')}: {d.message}"


def test_a_handle_to_a_node_never_added_points_at_the_node_holding_it() -> None:
    program = lp.Program("stray")
    stray = lp.CourierNode(Value, 1).create_handle()
    with program.group("pairs"):
        program.add_node(lp.CourierNode(Pair, 1, 2))
        program.add_node(lp.CourierNode(Pair, stray, 2))  # stray
    [d] = error_of(program).diagnostics
    assert d.pos == site("stray")
    assert d.message.startswith("node pairs/1 (CourierNode(Pair)) argument 'left' is a handle")


def test_an_impossible_colocation_points_at_where_it_was_added() -> None:
    program = lp.Program("empty")
    program.add_node(lp.CourierNode(Echo), label="echo")
    program.add_node(lp.MultiThreadingColocation([]), label="threads")  # empty
    [d] = error_of(program).diagnostics
    assert d.pos == site("empty")
    assert d.message == "a MultiThreadingColocation in group 'threads' holds no node"


def test_a_node_put_in_a_colocation_after_it_was_added() -> None:
    program = lp.Program("twice")
    node = lp.CourierNode(Echo)
    colocation = lp.MultiThreadingColocation([lp.CourierNode(Echo)])
    program.add_node(colocation, label="a")
    program.add_node(node, label="b")  # twice
    colocation.add_node(node)  # the colocation holds it now, and so does group b
    [d] = error_of(program).diagnostics
    assert d.pos == site("twice") and d.message == "CourierNode(Echo) is in the program twice"


def test_nodes_added_through_topo_code_are_placed_at_the_users_call() -> None:
    """make_program calls add_node itself: the position is the call of make_program."""
    program = lp.make_program(lp.CourierNode(Echo), lp.CourierNode(Pair, 1))  # made
    [d] = error_of(program).diagnostics
    assert d.pos == site("made")
    assert program.added_at(program.groups["node_0"][0]) == site("made")


def test_lp_launch_shows_the_position(tmp_path: Path) -> None:
    program = lp.Program("launch")
    program.add_node(lp.CourierNode(Pair, 1), label="pair")  # launch
    with pytest.raises(ValueError, match=r"node pair \(CourierNode\(Pair\)\).*right") as info:
        lp.launch(program, launch_type="test_mt", log_dir=str(tmp_path))
    assert str(info.value).startswith(f"{HERE}:{site('launch').line}:")


def test_a_program_error_travels_with_its_diagnostics() -> None:
    program = lp.Program("p")
    program.add_node(lp.CourierNode(Pair, 1), label="pair")
    error = error_of(program)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is lp.ProgramError and copy.diagnostics == error.diagnostics
    plain = lp.ProgramError("no position")  # raised from a message alone, as before
    assert str(plain) == "no position" and plain.diagnostics[0].pos is None


def test_graph_problems_are_placed_at_the_add_node_calls() -> None:
    """What the IR checks find is placed by the program's sites: a group's problem at the
    add_node of its first node, an executable's at its first node's, a colocation's at the
    colocation's. (Launchpad programs have no primaries or restart policies, so a setting
    is changed in the IR here to make the checks find something.)"""
    program = lp.Program("sites")
    program.add_node(lp.CourierNode(Echo), label="learner")
    with program.group("secondary"):
        program.add_node(lp.CourierNode(Echo))  # secondary
        program.add_node(lp.CourierNode(Echo))
    pair = [lp.CourierNode(Echo), lp.CourierNode(Value, 1)]
    program.add_node(lp.MultiThreadingColocation(pair), label="pair")  # pair
    compiled = lp.compile_program(program)
    ir = compiled.program
    assert check_program(ir) == []
    misused = tuple(
        dataclasses.replace(g, primary="nobody") if g.name == "secondary" else g for g in ir.groups
    )
    [problem] = check_program(dataclasses.replace(ir, groups=misused))
    d = compiled.sites.diagnostic(problem, ir.executables)
    assert d.message == "group 'secondary': primary '@nobody' does not exist"
    assert d.pos == site("secondary")
    [exe] = [e for e in ir.executables if e.mode == "set"]
    by_exe = compiled.sites.diagnostic(
        dataclasses.replace(problem, group="", executable=exe.id), ir.executables
    )
    assert by_exe.pos == site("pair")
    assert compiled.sites.colocations == [site("pair")]


def unbindable() -> lp.Program:
    """A builder for topo export whose program cannot be built."""
    program = lp.Program("unbindable")
    program.add_node(lp.CourierNode(Pair, 1), label="pair")  # exported
    return program


def test_topo_export_shows_the_builders_line(run_topo: Any) -> None:
    result = run_topo("export", "test_lp_diagnostics:unbindable")
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    where = site("exported")
    assert f"{where}: error: test_lp_diagnostics:unbindable: node pair" in result.stderr
    # The Python line is shown under the message, as a YAML line is.
    assert 'program.add_node(lp.CourierNode(Pair, 1), label="pair")' in result.stderr
