"""Thread colocation: colocated nodes share a process, others do not."""

from __future__ import annotations

import os

import pytest
from lp_nodes import Echo, block, stop_after
from lp_support import Launch

import topo.launchpad as lp


def test_colocated_nodes_share_a_process(lp_launch: Launch, launch_type: str) -> None:
    program = lp.Program("coloc")
    a, b, alone = lp.CourierNode(Echo), lp.CourierNode(Echo), lp.CourierNode(Echo)
    program.add_node(lp.MultiThreadingColocation([a, b]), label="pair")
    program.add_node(alone, label="alone")
    launched = lp_launch(program)
    pids = [n.create_handle().dereference().pid() for n in (a, b, alone)]
    assert pids[0] == pids[1]
    if launch_type == "test_mp":
        assert pids[0] != pids[2] and os.getpid() not in pids
        assert len(launched.run.launcher.pids()) == 2  # one process per executable
    else:
        assert set(pids) == {os.getpid()}
    ir = launched.program
    assert len(ir.executables) == 2
    assert {n.id for n in ir.nodes} == {"pair/0", "pair/1", "alone"}


def test_colocations_of_one_group_pack_its_nodes(lp_launch: Launch, launch_type: str) -> None:
    program = lp.Program("packed")
    nodes = [lp.CourierNode(Echo) for _ in range(4)]
    with program.group("actor"):
        program.add_node(lp.MultiThreadingColocation(nodes[:2]))
        program.add_node(lp.MultiThreadingColocation(nodes[2:]))
    launched = lp_launch(program)
    (group,) = launched.program.groups
    assert group.per_process == 2 and group.count == 4
    pids = [n.create_handle().dereference().pid() for n in nodes]
    if launch_type == "test_mp":
        assert pids[0] == pids[1] != pids[2] == pids[3]


def test_a_thread_colocation_stops_from_one_of_its_nodes(lp_launch: Launch) -> None:
    """Launchpad's colocation stop test: one thread waits, the other calls lp.stop()."""
    program = lp.Program("stop")
    inner = lp.MultiThreadingColocation([lp.PyNode(block), lp.PyNode(stop_after, 0.1)])
    program.add_node(lp.MultiThreadingColocation([lp.PyNode(block), inner]), label="node")
    (colocation,) = program.groups["node"]
    assert len(colocation.inner_nodes()) == 3  # nested thread colocations are flattened
    launched = lp_launch(program)
    assert launched.wait(timeout=60) == 0


def test_a_process_colocation_cannot_nest() -> None:
    with pytest.raises(ValueError, match="nests only thread colocations"):
        lp.MultiProcessingColocation([lp.MultiThreadingColocation([lp.PyNode(block)])])
    with pytest.raises(ValueError, match="nests only thread colocations"):
        lp.MultiThreadingColocation([lp.MultiProcessingColocation([lp.PyNode(block)])])


def test_process_colocation_runs_each_node_in_its_own_process(
    lp_launch: Launch, launch_type: str
) -> None:
    program = lp.Program("mpcoloc")
    a, b = lp.CourierNode(Echo), lp.CourierNode(Echo)
    program.add_node(lp.MultiProcessingColocation([a, b]), label="host")
    lp_launch(program)
    pid_a = a.create_handle().dereference().pid()
    pid_b = b.create_handle().dereference().pid()
    if launch_type == "test_mp":  # separate processes (on one host)
        assert pid_a != pid_b
