"""This checkout against an older commit, command by command, in interleaved pairs.

For a change that should not make anything slower (a restructuring), the baseline is
the code before it, measured in the same run on the same machine: each round runs every
command once with this checkout and once with the other commit (order alternating),
each in a fresh process, and the ratio is taken pair by pair. The commands:

* ``topo run`` of 10 and of 100 ``py`` nodes on procs whose ``run()`` returns at once
  (start-up, run and stop: the whole launch path, from the command to its exit);
* ``topo validate`` of ``acme_distributed.yaml`` with 10,000 nodes (load + compile);
* ``topo graph ... --dot`` of the same (load, compile, draw).

The other commit is checked out into a temporary git worktree and imported through
``PYTHONPATH`` with this checkout's virtual environment, so only topo's code differs.

    .venv/bin/python bench/versions_bench.py --base 8bf42ea [--rounds 8]

Writes bench/results/versions.json and bench/results/versions.md. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PYTHON = ROOT / ".venv" / "bin" / "python"
ACME = ROOT / "examples" / "topologies" / "acme_distributed.yaml"

QUICK = '''class Quick:
    """A node whose run() returns at once: the program ends when every node has run."""

    def run(self) -> None:
        return None
'''


def _commands(work: Path) -> dict[str, list[str]]:
    topo = [str(PYTHON), "-m", "topo"]
    big = ["-p", "num_actors=9995"]
    return {
        "topo run: 10 py nodes, procs": [*topo, "run", str(work / "ten.yaml"), "-q"],
        "topo run: 100 py nodes, procs": [*topo, "run", str(work / "hundred.yaml"), "-q"],
        "topo validate: 10,000 nodes": [*topo, "validate", str(ACME), *big],
        "topo graph --dot: 10,000 nodes": [*topo, "graph", str(ACME), *big, "--dot"],
    }


def _time(cmd: list[str], pythonpath: str, cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds (the process and its children) of one run of ``cmd``."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the older commit to compare against")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    base = subprocess.run(
        ["git", "rev-parse", "--short", args.base], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="topo-versions-"))
    old = work / "old"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(old), base], cwd=ROOT)
    try:
        (work / "quick.py").write_text(QUICK)
        for name, count in (("ten", 10), ("hundred", 100)):
            (work / f"{name}.yaml").write_text(
                f"name: {name}\nnodes:\n  quick:\n    target: quick:Quick\n    count: {count}\n"
            )
        trees = {"this": str(ROOT), "base": str(old)}
        samples: dict[str, dict[str, list[tuple[float, float]]]] = {}
        load_before = os.getloadavg()[0]
        for r in range(args.rounds):
            for name, cmd in _commands(work).items():
                order = ["this", "base"] if r % 2 == 0 else ["base", "this"]
                for tree in order:
                    got = _time(cmd, trees[tree], work)
                    samples.setdefault(name, {}).setdefault(tree, []).append(got)
        load_after = os.getloadavg()[0]
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT)
        shutil.rmtree(work, ignore_errors=True)

    rows = []
    for name, by_tree in samples.items():
        this, other = by_tree["this"], by_tree["base"]
        rows.append(
            {
                "command": name,
                "this_wall_s": statistics.median(w for w, _ in this),
                "base_wall_s": statistics.median(w for w, _ in other),
                "wall_ratio": statistics.median(
                    a[0] / b[0] for a, b in zip(this, other, strict=True)
                ),
                "cpu_ratio": statistics.median(
                    a[1] / b[1] for a, b in zip(this, other, strict=True)
                ),
            }
        )
    meta = {
        "this": head,
        "base": base,
        "rounds": args.rounds,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": [round(load_before, 1), round(load_after, 1)],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "versions.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = [
        f"# This checkout ({head}) against {base}",
        "",
        f"`.venv/bin/python bench/versions_bench.py --base {args.base} --rounds "
        f"{args.rounds}` — Python {meta['python']}, {meta['cpus']} CPUs (shared, noisy), "
        f"load average {meta['load'][0]} → {meta['load'][1]}. Each command in a fresh "
        "process, both versions in every round (order alternating); medians, and the "
        "ratio this/base taken pair by pair (below 1: this checkout is faster).",
        "",
        "| command | this: median wall s | base: median wall s | wall ratio | cpu ratio |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row['command']} | {row['this_wall_s']:.3f} | {row['base_wall_s']:.3f} "
            f"| {row['wall_ratio']:.3f} | {row['cpu_ratio']:.3f} |"
        )
    (RESULTS / "versions.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
