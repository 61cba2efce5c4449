"""A tiny stand-in for Launchpad's program builder, to write the seeds down as Python.

Each test in this package transcribes one Launchpad program from the seeds line by line
with :class:`SeedProgram` (``node`` is ``lp.CourierNode(fn, *args, **kwargs)`` returning
its handle, ``add`` is ``program.add_node`` of a node or of a ``MultiThreadingColocation``)
and compares what it recorded with the compiled IR in :func:`assert_mirrors`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topo.compile import compile_spec
from topo.ir import Program
from topo.loader import load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "topologies"


class _Opaque:
    """A value the seed passes that is neither a handle nor a plain value (a PRNG key)."""

    def __repr__(self) -> str:
        return "<opaque>"


KEY = _Opaque()


@dataclass(frozen=True)
class Handle:
    """What ``program.add_node`` / ``node.create_handle()`` return: a reference to a node."""

    id: str


@dataclass
class SeedProgram:
    """Records the nodes, processes, handles and plain arguments of a transcribed seed."""

    handles: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    nulls: dict[str, set[str]] = field(default_factory=dict)
    plain: dict[str, dict[str, Any]] = field(default_factory=dict)
    processes: list[frozenset[str]] = field(default_factory=list)
    stoppers: set[str] = field(default_factory=set)

    def node(self, node_id: str, signature: str, *args: Any, **kwargs: Any) -> Handle:
        """``lp.CourierNode(fn, *args, **kwargs)`` where ``fn`` takes ``signature``'s names."""
        names = [s.strip() for s in signature.split(",") if s.strip()]
        assert len(args) <= len(names), f"{node_id}: too many positional arguments"
        bound = dict(zip(names, args, strict=False)) | kwargs
        assert set(bound) <= set(names), f"{node_id}: unknown keyword in {sorted(bound)}"
        handles: set[tuple[str, str]] = set()
        for arg, value in bound.items():
            if isinstance(value, Handle):
                handles.add((arg, value.id))
            elif isinstance(value, list):  # a list of handles: the IR names each position
                handles.update((f"{arg}[{i}]", v.id) for i, v in enumerate(value))
        self.handles[node_id] = handles
        self.nulls[node_id] = {arg for arg, v in bound.items() if v is None}
        self.plain[node_id] = {
            arg: v for arg, v in bound.items() if isinstance(v, int | str) and v is not None
        }
        return Handle(node_id)

    def add(self, *nodes: Handle, stops: bool = False) -> Handle:
        """``program.add_node(node)``; several nodes: one ``MultiThreadingColocation`` process."""
        self.processes.append(frozenset(n.id for n in nodes))
        if stops:
            self.stoppers.update(n.id for n in nodes)
        return nodes[0]


def compile_seed(path: Path, params: dict[str, Any]) -> Program:
    """Compile an example with ``-p name=value`` for every parameter (None is YAML null)."""
    overrides = []
    for name, value in params.items():
        text = "null" if value is None else str(value).lower() if isinstance(value, bool) else value
        overrides.append(f"{name}={text}")
    return compile_spec(load_spec(path, overrides=overrides))


def assert_mirrors(program: Program, seed: SeedProgram) -> None:
    """The IR has the seed's nodes, processes, handles per node, null handles and plain values."""
    added = set().union(*seed.processes) if seed.processes else set()
    assert added == set(seed.handles), "every node the seed builds is added to the program"
    assert sorted(n.id for n in program.nodes) == sorted(added)
    got_processes = [frozenset(e.nodes) for e in program.executables]
    assert sorted(map(sorted, got_processes)) == sorted(map(sorted, seed.processes))
    got_handles: dict[str, set[tuple[str, str]]] = {n.id: set() for n in program.nodes}
    for e in program.edges:
        got_handles[e.src].add((e.arg, e.dst))
    assert got_handles == seed.handles
    for node in program.nodes:
        for arg in seed.nulls[node.id]:
            assert arg in node.args and node.args[arg] is None, (node.id, arg)
        for arg, value in seed.plain[node.id].items():
            assert node.args.get(arg) == value, (node.id, arg)
    stoppers = {n.id for n in program.nodes if program.group_index[n.group].stops_program}
    assert stoppers == seed.stoppers
