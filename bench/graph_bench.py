"""``topo graph`` at scale: a 10,000-node Acme topology drawn collapsed (goal: under 2 s).

Compiles ``examples/topologies/acme_distributed.yaml`` with enough actors for 10,000
nodes, then times each stage separately and the whole command end to end, as the
median of several runs:  ``.venv/bin/python bench/graph_bench.py [--runs N]``.
Writes bench/results/graph.json and bench/results/graph.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from topo.cli.common import load_program  # noqa: E402
from topo.ir import Program  # noqa: E402
from topo.render import (  # noqa: E402
    ViewOptions,
    build_view,
    render,
    to_dot,
    to_mermaid,
    to_tree,
)

EXAMPLE = ROOT / "examples" / "topologies" / "acme_distributed.yaml"
TARGET_NODES = 10_000
GOAL_S = 2.0


def actors_for(target: int) -> int:
    """Actor count that makes the example exactly ``target`` nodes."""
    probe = load_program(EXAMPLE, ["num_actors=1"])
    return target - (len(probe.nodes) - 1)


def median_s(fn: Callable[[], object], runs: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def tree_text(program: Program) -> str:
    from rich.console import Console

    with open(os.devnull, "w") as sink:
        console = Console(file=sink, width=120, record=True)
        console.print(to_tree(build_view(program)))
        return console.export_text()


def cli(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from topo.cli import main; main()", *args],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"topo {' '.join(args)} failed: {done.stderr.decode()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    ns = parser.parse_args()
    runs: int = ns.runs

    num_actors = actors_for(TARGET_NODES)
    params = [f"num_actors={num_actors}"]
    program = load_program(EXAMPLE, params)
    assert len(program.nodes) == TARGET_NODES, len(program.nodes)
    dot_text = to_dot(build_view(program))

    rows: list[dict[str, Any]] = []

    def measure(name: str, fn: Callable[[], object], note: str = "") -> None:
        med, times = median_s(fn, runs)
        rows.append(
            {
                "stage": name,
                "median_s": round(med, 4),
                "runs_s": [round(t, 4) for t in times],
                "note": note,
            }
        )
        print(f"{name:<48} median {med * 1000:8.1f} ms", flush=True)

    measure("compile (load + compile YAML, not rendering)", lambda: load_program(EXAMPLE, params))
    measure("view, collapsed (build_view)", lambda: build_view(program))
    measure("DOT, collapsed (build_view + to_dot)", lambda: to_dot(build_view(program)))
    measure("Mermaid, collapsed", lambda: to_mermaid(build_view(program)))
    measure("terminal tree, collapsed (rich, to text)", lambda: tree_text(program))
    if shutil.which("dot"):
        measure(
            "SVG, collapsed (to_dot + real dot -Tsvg)",
            lambda: render(to_dot(build_view(program)), "svg"),
        )
    measure(
        "DOT, expanded (every replica; text only)",
        lambda: to_dot(build_view(program, ViewOptions(expand=True))),
        "no layout: `dot` on 10,000 nodes takes minutes",
    )
    yaml = str(EXAMPLE)
    measure(
        "end to end: `topo graph FILE -p ... --dot`",
        lambda: cli(["graph", yaml, "-p", params[0], "--dot"]),
        "new interpreter, imports, compile, render",
    )
    if shutil.which("dot"):
        out = ROOT / "bench" / "results" / ".graph_bench.svg"
        measure(
            "end to end: `topo graph FILE -p ... --svg OUT`",
            lambda: cli(["graph", yaml, "-p", params[0], "--svg", str(out)]),
            "as above, plus Graphviz layout",
        )
        out.unlink(missing_ok=True)

    render_s = next(r["median_s"] for r in rows if r["stage"].startswith("DOT, collapsed"))
    e2e_s = next(
        r["median_s"] for r in rows if r["stage"].startswith("end to end") and "--dot" in r["stage"]
    )
    result = {
        "benchmark": "topo graph, 10,000-node acme_distributed, collapsed",
        "nodes": len(program.nodes),
        "edges": len(program.edges),
        "collapsed_boxes": dot_text.count("shape="),
        "runs": runs,
        "goal_s": GOAL_S,
        "render_collapsed_s": render_s,
        "end_to_end_dot_s": e2e_s,
        "meets_goal": e2e_s < GOAL_S,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "stages": rows,
    }
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "graph.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# `topo graph` benchmark",
        "",
        f"{len(program.nodes):,} nodes ({num_actors:,} actors) and {len(program.edges):,} "
        f"handles from `examples/topologies/acme_distributed.yaml -p {params[0]}`, drawn "
        f"collapsed into {result['collapsed_boxes']} boxes. Median of {runs} runs, "
        f"{os.cpu_count()} CPUs (shared, noisy), Python {platform.python_version()}.",
        "",
        "| stage | median ms | note |",
        "|---|---:|---|",
        *(f"| {r['stage']} | {r['median_s'] * 1000:.1f} | {r['note']} |" for r in rows),
        "",
        f"Goal: collapsed 10,000-node picture in under {GOAL_S:.0f} s end to end — "
        f"{'met' if result['meets_goal'] else 'NOT met'} ({e2e_s:.2f} s; rendering alone "
        f"{render_s * 1000:.0f} ms).",
        "",
        "Rerun: `.venv/bin/python bench/graph_bench.py`",
        "",
    ]
    (results / "graph.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
