"""``topo diff`` at scale: a 1,000-node program diffed against itself with one count
changed (goal: ≤ 0.2 s for the diff, issue 30).

Compiles ``examples/topologies/acme_distributed.yaml`` with enough actors for 1,000
nodes (four learners, so actors take their variables round-robin; two actors a
process), and the same with one actor more; times ``diff_programs`` and the printed
plan, median of several runs (compiling is not timed):
``.venv/bin/python bench/diff_bench.py [--runs N]``. Writes bench/results/diff.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from topo.api import load  # noqa: E402
from topo.ir.diff import diff_programs  # noqa: E402
from topo.ir.diff_printer import format_diff  # noqa: E402

EXAMPLE = ROOT / "examples" / "topologies" / "acme_distributed.yaml"
TARGET_NODES = 1_000
GOAL_S = 0.2
FIXED = ["num_learners=4", "num_actors_per_node=2"]


def median_s(fn: Callable[[], object], runs: int) -> float:
    """The median wall time of ``runs`` calls of ``fn``."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    """Measure, print and write the results table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    probe = load(EXAMPLE, [*FIXED, "num_actors=1"]).program
    actors = TARGET_NODES - (len(probe.nodes) - 1)
    old = load(EXAMPLE, [*FIXED, f"num_actors={actors}"]).program
    new = load(EXAMPLE, [*FIXED, f"num_actors={actors + 1}"]).program
    same = median_s(lambda: diff_programs(old, old), runs)
    changed = median_s(lambda: diff_programs(old, new), runs)
    plan = diff_programs(old, new)
    printed = median_s(lambda: format_diff(plan), runs)
    rows = [
        ("diff against itself", same),
        ("diff, one count changed (+1 actor)", changed),
        ("print that plan", printed),
    ]
    lines = [
        "# topo diff at scale",
        "",
        f"`python bench/diff_bench.py --runs {runs}` on {platform.machine()}, Python "
        f"{platform.python_version()}: `acme_distributed.yaml` with {len(old.nodes)} nodes "
        f"({actors} actors, {' '.join(FIXED)}) against {len(new.nodes)} nodes; medians of "
        f"{runs} runs, compiling not timed. Goal: the diff in ≤ {GOAL_S} s.",
        "",
        "| what | median |",
        "|---|---|",
        *(f"| {what} | {seconds * 1000:.1f} ms |" for what, seconds in rows),
        "",
        f"The plan: {len(plan.start)} node to start, {len(plan.restart)} to restart "
        f"(every actor's `num_actors` argument changes), {len(plan.stop)} to stop; "
        f"{len(format_diff(plan).splitlines())} lines printed.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    (ROOT / "bench" / "results" / "diff.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
