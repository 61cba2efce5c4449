"""A/B of a benchmark across two commits, measured in the same run.

Each commit is exported (``git archive``) into a folder of its own and byte-compiled;
then, round after round, the benchmark script runs in each (the order alternates from
round to round, so that neither side always runs on a machine the other just warmed or
loaded) and the JSON it writes is kept. The report is, for every timing in that JSON (a
number under a key ending in ``_s``), the median over the rounds on each side and their
ratio (new / base): a ratio within 0.95..1.05 is "the same" at ±5 %.

Run, e.g. (the arguments after ``--`` go to the benchmark):

    .venv/bin/python bench/ab.py --base 91b1585 --rounds 3 --name launch-ab \\
        --results bench/results/launch.json -- bench/launch_bench.py --sizes 10 100

Writes bench/results/NAME.json (every round's figures) and bench/results/NAME.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"samples", "naive_samples", "topo_samples"}  # every sample: the medians suffice


def export(rev: str, into: Path) -> str:
    """``rev``'s tree in ``into``, byte-compiled; its full commit id."""
    commit = subprocess.run(
        ["git", "rev-parse", rev], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    into.mkdir(parents=True)
    archive = subprocess.Popen(["git", "archive", commit], cwd=ROOT, stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {rev} failed")
    subprocess.run([sys.executable, "-m", "compileall", "-q", "topo"], cwd=into, check=True)
    return commit


def timings(data: Any, path: str = "") -> dict[str, float]:
    """Every number under a key ending in ``_s``, by its path (list items by their
    ``nodes`` when they have one, else their index)."""
    found: dict[str, float] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            if key in SKIP:
                continue
            where = f"{path}.{key}" if path else str(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                if str(key).endswith("_s") or path.endswith("_s"):
                    found[where] = float(value)
            else:
                found |= timings(value, where)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            label = item.get("nodes", i) if isinstance(item, dict) else i
            found |= timings(item, f"{path}[{label}]")
    return found


def run_once(tree: Path, script: list[str], results: str, home: Path) -> dict[str, Any]:
    """The benchmark run in ``tree``: the JSON it wrote."""
    env = {**os.environ, "PYTHONPATH": str(tree), "TOPO_HOME": str(home)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, *script], cwd=tree, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(script)} failed in {tree} (exit {done.returncode})")
    data = json.loads((tree / results).read_text())
    data["_wall_s"] = time.monotonic() - started
    return data


def report(name: str, commits: dict[str, str], rounds: dict[str, list[dict[str, Any]]]) -> str:
    """The markdown table: median of each timing per side, and new / base."""
    per_side = {side: [timings(r) for r in runs] for side, runs in rounds.items()}
    keys = [k for k in per_side["base"][0] if all(k in r for r in per_side["new"])]
    lines = [
        f"# {name}: base {commits['base'][:10]} against new {commits['new'][:10]}",
        "",
        f"{len(rounds['base'])} rounds, alternating; medians over the rounds; load average "
        f"{os.getloadavg()[0]:.2f} at the end.",
        "",
        "| timing | base (s) | new (s) | new / base |",
        "| --- | ---: | ---: | ---: |",
    ]
    for key in keys:
        base = statistics.median(r[key] for r in per_side["base"])
        new = statistics.median(r[key] for r in per_side["new"])
        ratio = f"{new / base:.3f}" if base > 0 else "n/a"
        lines.append(f"| {key} | {base:.4f} | {new:.4f} | {ratio} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--new", default="HEAD", help="the commit measured (default HEAD)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--results", required=True, help="the JSON the benchmark writes")
    parser.add_argument("--name", required=True, help="bench/results/NAME.md and .json")
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS]")
    args = parser.parse_args()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        parser.error("give the benchmark after --")
    work = Path(tempfile.mkdtemp(prefix="topo-ab-"))
    try:
        trees = {"base": work / "base", "new": work / "new"}
        commits = {side: export(getattr(args, side), tree) for side, tree in trees.items()}
        rounds: dict[str, list[dict[str, Any]]] = {"base": [], "new": []}
        for i in range(args.rounds):
            order = ("base", "new") if i % 2 == 0 else ("new", "base")
            for side in order:
                print(f"round {i + 1}/{args.rounds}: {side}", flush=True)
                home = work / f"home-{side}"
                rounds[side].append(run_once(trees[side], script, args.results, home))
        out = ROOT / "bench" / "results"
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{args.name}.json").write_text(
            json.dumps({"commits": commits, "script": script, "rounds": rounds}, indent=1)
        )
        text = report(args.name, commits, rounds)
        (out / f"{args.name}.md").write_text(text)
        print(text)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
