"""Launchpad's public names on ``topo.launchpad``: each exists and behaves as Launchpad's
does, or says what topo does instead."""

from __future__ import annotations

import os
import pickle
import socket
import threading
import typing
from pathlib import Path

import pytest
from lp_nodes import Echo, Typed, noop, serve_on
from lp_support import Launch, stop_and_check

import topo.launchpad as lp
from topo.testing import wait_until

# The public names of launchpad/__init__.py at google-deepmind/launchpad commit
# 3b28eaed02c4294197b9ca2b8988cf68d8b5d868 (its internal ``lazy_loader`` left out).
LAUNCHPAD_NAMES = [
    "flags",
    "LaunchType",
    "is_local_launch",
    "is_local_launch_or_test",
    "LAUNCH_TYPE",
    "Program",
    "launch",
    "CourierHandle",
    "CourierNode",
    "CourierClient",
    "MultiThreadingColocation",
    "PyClassNode",
    "PyNode",
    "Address",
    "AbstractAddressBuilder",
    "get_port_from_address",
    "SimpleLocalAddressBuilder",
    "register_stop_handler",
    "stop_event",
    "unregister_stop_handler",
    "wait_for_stop",
    "make_program_stopper",
    "stop",
    "ReverbNode",
    "DockerConfig",
    "batched_handler",
]
# The public names of launchpad/context.py at the same commit.
CONTEXT_NAMES = [
    "LaunchType",
    "LaunchContext",
    "get_context",
    "set_context",
    "is_local_launch",
    "is_local_launch_or_test",
]


def test_every_launchpad_name_is_there() -> None:
    assert sorted(set(LAUNCHPAD_NAMES) - set(dir(lp))) == []
    for name in LAUNCHPAD_NAMES:
        assert getattr(lp, name) is not None
    assert sorted(set(CONTEXT_NAMES) - set(dir(lp.context))) == []
    for name in CONTEXT_NAMES:
        assert getattr(lp.context, name) is not None
    assert lp.context.LaunchType is lp.LaunchType


@pytest.mark.parametrize(
    ("launch_type", "local", "local_or_test"),
    [
        ("local_mt", True, True),
        ("local_mp", True, True),
        ("test_mt", False, True),
        ("test_mp", False, True),
        ("vertex_ai", False, False),
    ],
)
def test_is_local_launch(launch_type: str, local: bool, local_or_test: bool) -> None:
    assert lp.is_local_launch(launch_type) is local
    assert lp.is_local_launch_or_test(launch_type) is local_or_test
    if launch_type != "vertex_ai":
        assert lp.is_local_launch(lp.LaunchType(launch_type)) is local
    with pytest.raises(ValueError, match="'xm'"):
        lp.is_local_launch("xm")


def test_launch_type_flag_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOPO_LP_LAUNCH_TYPE", "test_mp")
    assert lp.LAUNCH_TYPE.value == "test_mp"
    assert lp.is_local_launch_or_test(lp.LAUNCH_TYPE.value)


def test_launch_context() -> None:
    with pytest.raises(RuntimeError, match=r"topo does not set one.*lp\.stop\(\)"):
        lp.context.get_context()
    context = lp.context.LaunchContext()
    with pytest.raises(RuntimeError, match="not yet initialized"):
        context.launch_type  # noqa: B018
    context.initialize(lp.LaunchType.TEST_MULTI_THREADING, launch_config=None)
    found: list[lp.context.LaunchContext] = []

    def in_thread() -> None:  # a thread's own context, as in Launchpad
        lp.context.set_context(context)
        found.append(lp.context.get_context())

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert found == [context]
    assert context.launch_type is lp.LaunchType.TEST_MULTI_THREADING
    assert context.program_stopper is None


def test_docker_config_says_what_topo_does() -> None:
    with pytest.raises(NotImplementedError, match="backend='ssh'"):
        lp.DockerConfig("/src", "requirements.txt")


def test_address() -> None:
    with pytest.raises(ValueError, match="Wrong address name: Bad"):
        lp.Address("Bad")
    address = lp.Address("courier")
    with pytest.raises(RuntimeError, match=r"not assigned to any node.*SimpleLocalAddressBuilder"):
        address.resolve()
    node = lp.CourierNode(Echo)
    address.assign(node)
    address.assign(node)  # the same node again: nothing changes
    assert node.addresses == [address]
    with pytest.raises(ValueError, match="already assigned"):
        address.assign(lp.PyNode(noop))
    with pytest.raises(RuntimeError, match=r"of <CourierNode\(Echo\)>"):
        address.resolve()
    address.bind(lp.SimpleLocalAddressBuilder())
    text = address.resolve()
    host, port = text.split(":")
    assert host == "localhost" and 0 < int(port) < 65536
    assert address.resolve() == text  # the builder keeps its port
    assert lp.get_port_from_address(text) == int(port)
    copy = pickle.loads(pickle.dumps(address))  # the owning node stays behind
    assert copy.resolve() == text and copy.name == "courier"
    other = lp.Address()
    lp.PyNode(noop).allocate_address(other)
    assert isinstance(lp.SimpleLocalAddressBuilder(), lp.AbstractAddressBuilder)
    with pytest.raises(TypeError):
        lp.AbstractAddressBuilder()  # type: ignore[abstract]


def test_a_local_launch_binds_the_addresses_of_its_nodes(
    lp_launch: Launch, launch_type: str
) -> None:
    """As Launchpad's local launches do: a node serving on its own ``lp.Address`` finds it
    bound to a free local port, the launcher's copy resolves to the same one, and an
    address the program bound itself keeps its builder."""
    address, mine = lp.Address(), lp.Address("mine")
    server = lp.PyNode(serve_on, address)
    server.allocate_address(address)
    other = lp.PyNode(noop)
    other.allocate_address(mine)
    builder = lp.SimpleLocalAddressBuilder()
    mine.bind(builder)
    program = lp.Program("addresses")
    program.add_node(server, label="server")
    program.add_node(other, label="other")
    lp_launch(program)
    assert mine.resolve() == builder.build()
    port = lp.get_port_from_address(address.resolve())

    def served() -> str:
        with socket.create_connection(("localhost", port), timeout=10) as conn:
            return conn.recv(100).decode()

    reply = wait_until(  # refused while the node is not listening yet
        served, 60, what="the node to serve on its address", errors=(ConnectionRefusedError,)
    )
    served_port, pid = reply.split()
    assert int(served_port) == port
    assert (int(pid) == os.getpid()) == (launch_type == "test_mt")  # threads, or its process


def test_get_port_from_a_named_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LP_PORT_courier", "4321")
    assert lp.get_port_from_address("localhost:courier") == 4321
    assert lp.get_port_from_address("[::1]:8080") == 8080
    with pytest.raises(KeyError, match="LP_PORT_missing"):
        lp.get_port_from_address("host:missing")


def test_input_handles_show_the_graph() -> None:
    program = lp.Program("graph")
    left = program.add_node(lp.CourierNode(Echo), label="left")
    right = program.add_node(lp.CourierNode(Echo), label="right")
    assert left is not None and right is not None
    node = lp.CourierNode(Echo, left, peers=[right, {"again": left}], n=3)
    program.add_node(node, label="user")
    assert node.input_handles == [left, right, left]
    assert [h.node.describe() for h in node.input_handles] == ["CourierNode(Echo)"] * 3
    node.input_handles.clear()  # a copy: the node keeps its own
    assert len(node.input_handles) == 3
    node.configure(right)  # configure replaces the arguments, and so the handles
    assert node.input_handles == [right]
    assert lp.PyNode(noop).input_handles == []
    colocation = lp.MultiThreadingColocation([lp.CourierNode(Echo, left)])
    assert colocation.input_handles == []  # as in Launchpad: its nodes have them
    assert colocation.nodes[0].input_handles == [left]


def test_courier_client_annotations_and_isinstance(lp_launch: Launch) -> None:
    hints = typing.get_type_hints(Typed.__init__)
    assert hints["peers"] == list[lp.CourierClient]
    program = lp.Program("typed")
    with program.group("echo"):
        echoes = [program.add_node(lp.CourierNode(Echo)) for _ in range(2)]
    typed = program.add_node(lp.CourierNode(Typed, echoes), label="typed")
    assert typed is not None and echoes[0] is not None
    lp_launch(program)
    client = typed.dereference()
    assert isinstance(client, lp.CourierClient)
    assert isinstance(echoes[0].dereference(), lp.CourierClient)
    assert client.are_clients() == [True, True]  # inside the node, handles are clients
    assert client.ask() == ["pong", "pong"]


class NotSerializable(lp.PyNode):
    """Launchpad's own serialization test node: a PyNode subclass that skips
    ``PyNode.__init__`` and holds an Event, used as another PyNode's function."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def __call__(self) -> None:
        return None


def _unpicklable_program() -> lp.Program:
    program = lp.Program("quick_stop")
    program.add_node(lp.PyNode(NotSerializable()), label="my_node")
    return program


@pytest.mark.parametrize("launch_type", ["test_mt", "test_mp"])
def test_serialize_py_nodes_raises_launchpads_error(launch_type: str, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="The nodes associated to the label 'my_node'") as info:
        lp.launch(
            _unpicklable_program(),
            launch_type=launch_type,
            serialize_py_nodes=True,
            log_dir=str(tmp_path / "runs"),
        )
    assert "TypeError: cannot pickle" in str(info.value)
    assert "serialize_py_nodes=False" in str(info.value)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_serialize_py_nodes_false_runs_it_on_threads(tmp_path: Path) -> None:
    launched = lp.launch(
        _unpicklable_program(),
        launch_type="test_mt",
        serialize_py_nodes=False,
        log_dir=str(tmp_path / "runs"),
    )
    try:
        launched.wait(timeout=60)
    finally:
        stop_and_check(launched)


def test_serialize_py_nodes_passes_handles(tmp_path: Path) -> None:
    program = lp.Program("handles")
    echo = program.add_node(lp.CourierNode(Echo), label="echo")
    program.add_node(lp.CourierNode(Typed, [echo]), label="typed")
    launched = lp.launch(
        program, launch_type="test_mt", serialize_py_nodes=True, log_dir=str(tmp_path / "runs")
    )
    stop_and_check(launched)


def test_a_half_built_node_is_still_describable() -> None:
    assert repr(NotSerializable()) == "<NotSerializable>"
