"""Hand-built Programs shaped like the seed topologies, for renderer tests.

They are built directly as IR (no loader), so the renderer tests do not depend
on the compiler; tests over the real ``examples/topologies`` live beside them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from topo.ir import Edge, Executable, Group, Node, Program, Ref, freeze, iter_refs

ArgsFn = Callable[[int], dict[str, Any]]


@dataclass
class _G:
    group: Group
    args: ArgsFn
    vias: dict[str, str]


@dataclass
class ProgramBuilder:
    """Declare groups, thread sets and placements; ``build()`` gives the compiled IR."""

    name: str
    _groups: list[_G] = field(default_factory=list)
    _sets: list[tuple[str, list[str]]] = field(default_factory=list)
    _place: dict[str, str] = field(default_factory=dict)

    def group(
        self,
        name: str,
        *,
        kind: str = "courier",
        target: str = "examples.agents.x:Thing",
        count: int | None = None,
        per_process: int | None = None,
        enabled: bool = True,
        args: ArgsFn | None = None,
        vias: dict[str, str] | None = None,
    ) -> ProgramBuilder:
        singleton = count is None
        g = Group(
            name=name,
            kind=kind,
            target=target,  # type: ignore[arg-type]
            count=1 if count is None else count,
            enabled=enabled,
            singleton=singleton,
            per_process=per_process,
        )
        self._groups.append(_G(g, args or (lambda i: {}), vias or {}))
        return self

    def threads(self, name: str, *node_ids: str) -> ProgramBuilder:
        """Named cross-group thread colocation (an executable of mode ``set``)."""
        self._sets.append((name, list(node_ids)))
        return self

    def place(self, placement: str, *node_ids: str) -> ProgramBuilder:
        """Put the executables holding these nodes on one host."""
        for n in node_ids:
            self._place[n] = placement
        return self

    @staticmethod
    def ids(g: Group) -> list[str]:
        if not g.enabled:
            return []
        if g.singleton:
            return [g.name]
        return [f"{g.name}/{i}" for i in range(g.count)]

    def build(self) -> Program:
        in_set = {n: s for s, ns in self._sets for n in ns}
        nodes: list[Node] = []
        edges: list[Edge] = []
        execs: list[Executable] = []
        for spec in self._groups:
            g = spec.group
            ids = self.ids(g)
            per = g.per_process or 1
            for i, nid in enumerate(ids):
                if nid in in_set:
                    ex = in_set[nid]
                elif per > 1:
                    ex = f"{g.name}.{i // per}"
                else:
                    ex = nid.replace("/", ".")
                args = freeze(spec.args(i))
                nodes.append(Node(nid, g.name, i, args, seed=1000 + len(nodes), executable=ex))  # type: ignore[arg-type]
                for path, ref in iter_refs(args):
                    via = spec.vias.get(path.split("[")[0].split(".")[0], "ref")
                    edges.append(Edge(nid, ref.node, path, via))  # type: ignore[arg-type]
            if per > 1:
                for k in range(0, len(ids), per):
                    chunk = [n for n in ids[k : k + per] if n not in in_set]
                    ex_id = f"{g.name}.{k // per}"
                    execs.append(
                        Executable(ex_id, tuple(chunk), "replicas", self._place.get(chunk[0]))
                    )
            else:
                for nid in ids:
                    if nid not in in_set:
                        execs.append(
                            Executable(
                                nid.replace("/", "."), (nid,), "single", self._place.get(nid)
                            )
                        )
        for s, ns in self._sets:
            execs.append(Executable(s, tuple(ns), "set", self._place.get(ns[0])))
        return Program(
            name=self.name,
            seed=0,
            params=freeze({}),  # type: ignore[arg-type]
            groups=tuple(s.group for s in self._groups),
            nodes=tuple(nodes),
            edges=tuple(edges),
            executables=tuple(execs),
        )


def rr(i: int, pool: list[str]) -> Ref:
    return Ref(pool[i % len(pool)])


def consumer_producers(num_producers: int = 3) -> Program:
    return (
        ProgramBuilder("consumer_producers")
        .group("producer", target="examples.agents.cp:Producer", count=num_producers)
        .group(
            "consumer",
            kind="py",
            target="examples.agents.cp:Consumer",
            args=lambda i: {"producers": [Ref(f"producer/{k}") for k in range(num_producers)]},
        )
        .build()
    )


def acme_distributed(
    num_actors: int = 4, num_learners: int = 2, per_process: int = 2, limiter: bool = True
) -> Program:
    pool = ["learner"] + [f"secondary_learner/{k}" for k in range(num_learners - 1)]
    return (
        ProgramBuilder("acme_distributed")
        .group("replay", kind="reverb", target="examples.agents.dqn:make_replay_tables")
        .group("counter", target="topo.nodes:Counter")
        .group(
            "steps_limiter",
            kind="py",
            target="topo.nodes:StepsLimiter",
            enabled=limiter,
            args=lambda i: {"counter": Ref("counter"), "max_steps": 100},
        )
        .group(
            "learner",
            target="examples.agents.dqn:Learner",
            args=lambda i: {"replay": Ref("replay"), "counter": Ref("counter")},
        )
        .group(
            "secondary_learner",
            target="examples.agents.dqn:Learner",
            count=num_learners - 1,
            args=lambda i: {"replay": Ref("replay"), "primary": Ref("learner")},
            vias={"primary": "primary"},
        )
        .group(
            "actor",
            target="examples.agents.dqn:Actor",
            count=num_actors,
            per_process=per_process,
            args=lambda i: {
                "replay": Ref("replay"),
                "counter": Ref("counter"),
                "variable_source": rr(i, pool),
                "actor_id": i,
            },
            vias={"variable_source": "round_robin"},
        )
        .group(
            "evaluator",
            kind="py",
            target="examples.agents.dqn:Evaluator",
            args=lambda i: {"variable_source": Ref("learner"), "counter": Ref("counter")},
        )
        .build()
    )


def acme_colocated(num_actors: int = 3) -> Program:
    return (
        ProgramBuilder("acme_colocated")
        .group("replay", kind="reverb", target="examples.agents.dqn:make_replay_tables")
        .group("counter", target="topo.nodes:Counter")
        .group(
            "learner",
            target="examples.agents.dqn:Learner",
            args=lambda i: {"replay": Ref("replay"), "counter": Ref("counter")},
        )
        .group(
            "actor",
            target="examples.agents.dqn:Actor",
            count=num_actors,
            args=lambda i: {"replay": Ref("replay"), "variable_source": Ref("learner")},
        )
        .threads("learner_replay", "learner", "replay")
        .place("gpu_host", "learner", "counter")
        .build()
    )


def mava_dial(num_executors: int = 6, num_caches: int = 2) -> Program:
    caches = [f"cacher/{k}" for k in range(num_caches)]
    b = (
        ProgramBuilder("mava_dial")
        .group("replay", kind="reverb", target="examples.agents.dial:tables")
        .group(
            "trainer",
            target="examples.agents.dial:Trainer",
            args=lambda i: {"replay": Ref("replay")},
        )
    )
    if num_caches:
        b = b.group(
            "cacher",
            kind="cacher",
            target="topo.nodes:Cacher",
            count=num_caches,
            args=lambda i: {"source": Ref("trainer")},
            vias={"source": "source"},
        )
    return b.group(
        "executor",
        target="examples.agents.dial:Executor",
        count=num_executors,
        args=lambda i: {
            "replay": Ref("replay"),
            "variable_source": rr(i, caches) if caches else Ref("trainer"),
        },
        vias={"variable_source": "round_robin" if caches else "fallback"},
    ).build()


def acme_offline() -> Program:
    return (
        ProgramBuilder("acme_offline")
        .group("counter", target="topo.nodes:Counter")
        .group(
            "learner",
            kind="py",
            target="examples.agents.bc:Learner",
            args=lambda i: {"counter": Ref("counter")},
        )
        .group(
            "evaluator",
            kind="py",
            target="examples.agents.bc:Evaluator",
            args=lambda i: {"variable_source": Ref("learner"), "counter": Ref("counter")},
        )
        .build()
    )


SEEDS: dict[str, Callable[[], Program]] = {
    "consumer_producers": consumer_producers,
    "acme_distributed": acme_distributed,
    "acme_colocated": acme_colocated,
    "mava_dial": mava_dial,
    "acme_offline": acme_offline,
}
