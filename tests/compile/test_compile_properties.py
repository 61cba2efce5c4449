"""Property tests (hypothesis) of the compiler over random counts, pools and packings."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topo.compile import compile_spec
from topo.ir import Program, Ref, iter_refs
from topo.loader import load_spec

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@dataclass(frozen=True)
class Case:
    """A random topology: source groups, and a consumer wired to them."""

    sources: dict[str, int | None]  # name -> count (None: a singleton group)
    enabled: dict[str, bool]
    consumers: int
    per_process: int | None
    pool: tuple[str, ...]  # source group names in the round-robin pool
    per: str
    seed: int

    def text(self) -> str:
        nodes: dict[str, Any] = {"trainer": {"target": "pkg.mod:Trainer"}}
        for name, count in self.sources.items():
            group: dict[str, Any] = {"target": "pkg.mod:Source", "args": {"up": "@trainer"}}
            if count is not None:
                group["count"] = f"${{n_{name}}}"
            group["enabled"] = self.enabled[name]
            nodes[name] = group
        consumer: dict[str, Any] = {
            "target": "pkg.mod:Consumer",
            "count": "${n_consumers}",
            "args": {
                "src": {
                    "round_robin": [
                        f"@{g}?" for g in self.pool
                    ],  # ? : a disabled group adds nothing
                    "fallback": ["@trainer"],
                    "per": self.per,
                },
                "id": "${replica}",
                "key": "${seed.key}",
                "all": [f"@{g}?" for g in self.sources],
            },
        }
        if self.per_process is not None:
            consumer["colocate"] = {"per_process": self.per_process}
        nodes["consumer"] = consumer
        params = {f"n_{g}": c for g, c in self.sources.items() if c is not None}
        params["n_consumers"] = self.consumers
        doc = {"name": "prop", "seed": self.seed, "params": params, "nodes": nodes}
        # JSON is YAML; one key per line keeps positions meaningful.
        return json.dumps(doc, indent=2)

    def count(self, group: str) -> int:
        if not self.enabled[group]:
            return 0
        c = self.sources[group]
        return 1 if c is None else c

    def pool_nodes(self) -> list[str]:
        out: list[str] = []
        for g in self.pool:
            c = self.sources[g]
            if not self.enabled[g]:
                continue
            out.extend([g] if c is None else [f"{g}/{i}" for i in range(c)])
        return out or ["trainer"]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    names = draw(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=5, unique=True))
    sources = {n: draw(st.none() | st.integers(0, 6)) for n in names}
    enabled = {n: draw(st.booleans() | st.just(True)) for n in names}
    pool = tuple(draw(st.lists(st.sampled_from(names), min_size=1, max_size=4)))
    return Case(
        sources=sources,
        enabled=enabled,
        consumers=draw(st.integers(0, 40)),
        per_process=draw(st.none() | st.integers(1, 5)),
        pool=pool,
        per=draw(st.sampled_from(["replica", "process"])),
        seed=draw(st.integers(0, 2**31)),
    )


def build(case: Case, tmp: Path) -> Program:
    path = tmp / "prop.yaml"
    path.write_text(case.text(), encoding="utf-8")
    return compile_spec(load_spec(path))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("props")


@SETTINGS
@given(case=cases())
def test_node_count_is_the_sum_of_counts(case: Case, tmp: Path) -> None:
    program = build(case, tmp)
    expected = 1 + case.consumers + sum(case.count(g) for g in case.sources)
    assert len(program.nodes) == expected
    assert len({n.id for n in program.nodes}) == expected
    for g in program.groups:
        assert len(program.nodes_of(g.name)) == g.count
        assert [n.replica for n in program.nodes_of(g.name)] == list(range(g.count))


@pytest.mark.slow
@SETTINGS
@given(case=cases())
def test_every_reference_resolves_and_is_an_edge(case: Case, tmp: Path) -> None:
    program = build(case, tmp)
    ids = set(program.node_index)
    from_args = set()
    for node in program.nodes:
        for path, ref in iter_refs(node.args):
            assert ref.node in ids, (node.id, path, ref)
            from_args.add((node.id, ref.node, path))
    assert {(e.src, e.dst, e.arg) for e in program.edges} == from_args
    enabled_sources = [g for g in case.sources if case.enabled[g]]
    for node in program.nodes_of("consumer"):
        assert len(node.args["all"]) == len(case.sources)
        for g, value in zip(case.sources, node.args["all"], strict=True):
            if g not in enabled_sources:
                assert value is None
            elif case.sources[g] is None:
                assert value == Ref(g)
            else:
                assert value == tuple(Ref(f"{g}/{i}") for i in range(case.count(g)))


@SETTINGS
@given(case=cases())
def test_round_robin_matches_itertools_cycle(case: Case, tmp: Path) -> None:
    program = build(case, tmp)
    pool = case.pool_nodes()
    consumers = program.nodes_of("consumer")
    got = [n.args["src"].node for n in consumers]
    if case.per == "replica":
        assert got == list(itertools.islice(itertools.cycle(pool), len(consumers)))
        if len(set(pool)) == len(pool):  # each source listed once: balanced to within one
            tally = Counter(got)
            per_source = [tally[p] for p in pool]
            assert max(per_source) - min(per_source) <= 1
    else:
        exes = list(dict.fromkeys(n.executable for n in consumers))
        expected_by_exe = dict(zip(exes, itertools.cycle(pool), strict=False))
        assert got == [expected_by_exe[n.executable] for n in consumers]
        for exe in exes:  # one source per process
            assert (
                len({program.node(n).args["src"] for n in program.executable_index[exe].nodes}) == 1
            )
    via = "fallback" if pool == ["trainer"] and "trainer" not in case.pool else "round_robin"
    assert {e.via for e in program.edges if e.arg == "src"} <= {via}


@SETTINGS
@given(case=cases())
def test_seeds_are_distinct_and_stable(case: Case, tmp: Path) -> None:
    first = build(case, tmp)
    seeds = [n.seed for n in first.nodes]
    assert len(set(seeds)) == len(seeds)
    assert all(0 <= s < 2**32 for s in seeds)
    assert seeds == [n.seed for n in build(case, tmp).nodes]
    for node in first.nodes_of("consumer"):
        assert node.args["key"] == (0, node.seed)
        assert node.args["id"] == node.replica


@SETTINGS
@given(case=cases())
def test_executables_partition_the_nodes(case: Case, tmp: Path) -> None:
    program = build(case, tmp)
    placed = [n for exe in program.executables for n in exe.nodes]
    assert sorted(placed) == sorted(program.node_index)
    assert len({e.id for e in program.executables}) == len(program.executables)
    for exe in program.executables:
        for node_id in exe.nodes:
            assert program.node(node_id).executable == exe.id
    consumer_exes = [
        e for e in program.executables if e.nodes and e.nodes[0].startswith("consumer")
    ]
    if case.per_process is not None:
        assert all(len(e.nodes) <= case.per_process for e in consumer_exes)
        assert len(consumer_exes) == -(-case.consumers // case.per_process)


def test_seeds_are_stable_across_interpreters() -> None:
    """Different PYTHONHASHSEEDs must not change node seeds (no hash() in seed derivation)."""
    script = (
        "from topo.loader import load_spec; from topo.compile import compile_spec;"
        "p = compile_spec(load_spec('examples/topologies/acme_distributed.yaml'));"
        "print([(n.id, n.seed) for n in p.nodes])"
    )
    outs = set()
    for hashseed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        proc = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        outs.add(proc.stdout)
    assert len(outs) == 1
    assert "('actor/0', " in outs.pop()
