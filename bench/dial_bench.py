"""DIAL on the switch riddle (3 prisoners), mava_dial.yaml on procs, with 0, 1 and 2 cachers.

Each setting is one run of ``examples/topologies/mava_dial.yaml`` that stops by itself
after ``--steps`` executor steps. From the run's metrics files it takes the evaluator's
normalised reward (greedy policy, 200 episodes, return over the oracle's) against
training episodes and wall time, and the trainer's ``get_variables`` calls per second —
what the cachers are there to cut. Writes bench/results/dial_bench.json, .md and
dial_learning.png. Rerun: ``.venv/bin/python bench/dial_bench.py`` (about 8 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
TOPOLOGY = ROOT / "examples" / "topologies" / "mava_dial.yaml"
GOAL = 0.9


def rows(run_dir: Path, node: str) -> list[dict[str, Any]]:
    """The metric rows a node wrote during the run."""
    path = run_dir / "metrics" / f"{node.replace('/', '_')}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def one_run(caches: int, steps: int, seed: int, log_dir: Path) -> dict[str, Any]:
    """Run the topology once; the figures of that run."""
    import topo

    start = time.time()
    run = topo.launch(
        TOPOLOGY,
        backend="procs",
        params={"num_caches": caches, "max_executor_steps": steps, "seed": seed},
        log_dir=log_dir,
    )
    code = run.wait(3600)
    wall = time.time() - start
    evals = rows(run.run_dir, "evaluator")
    trainer = rows(run.run_dir, "trainer")
    t0 = evals[0]["time"] if evals else start
    curve = [
        {
            "seconds": round(r["time"] - start, 1),
            "episodes": r.get("executor_episodes", 0),
            "normalised_reward": r["normalised_reward"],
        }
        for r in evals
    ]
    reached = next((c for c in curve if c["normalised_reward"] >= GOAL), None)
    span = trainer[-1]["time"] - trainer[0]["time"] if len(trainer) > 1 else 0.0
    calls = trainer[-1]["variable_requests"] - trainer[0]["variable_requests"] if trainer else 0
    return {
        "caches": caches,
        "exit_code": code,
        "wall_s": round(wall, 1),
        "first_eval_after_s": round(t0 - start, 1),
        "final_normalised_reward": curve[-1]["normalised_reward"] if curve else None,
        "best_normalised_reward": max((c["normalised_reward"] for c in curve), default=None),
        "reached_goal_s": None if reached is None else reached["seconds"],
        "reached_goal_episodes": None if reached is None else reached["episodes"],
        "trainer_steps_per_s": trainer[-1]["steps_per_s"] if trainer else None,
        "trainer_variable_calls_per_s": round(calls / span, 2) if span else None,
        "curve": curve,
    }


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Normalised reward against training episodes and against wall time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for r in results:
        label = f"{r['caches']} cacher{'s' if r['caches'] != 1 else ''}"
        xs_e = [c["episodes"] for c in r["curve"]]
        xs_t = [c["seconds"] for c in r["curve"]]
        ys = [c["normalised_reward"] for c in r["curve"]]
        axes[0].plot(xs_e, ys, marker=".", label=label)
        axes[1].plot(xs_t, ys, marker=".", label=label)
    for ax, xlabel in zip(axes, ("training episodes", "seconds since launch"), strict=True):
        ax.axhline(GOAL, color="grey", linestyle="--", linewidth=0.8)
        ax.axhline(0.72, color="red", linestyle=":", linewidth=0.8, label="best without talking")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("normalised reward (greedy, 200 episodes)")
        ax.set_ylim(-0.2, 1.05)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle("DIAL, switch riddle with 3 prisoners, mava_dial.yaml on procs (2 cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=100_000, help="executor steps per run")
    parser.add_argument("--caches", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for caches in args.caches:
            results.append(one_run(caches, args.steps, args.seed, Path(tmp)))
            r = results[-1]
            print(
                f"{caches} cachers: exit {r['exit_code']}, final {r['final_normalised_reward']}, "
                f"{GOAL} after {r['reached_goal_s']} s, trainer get_variables "
                f"{r['trainer_variable_calls_per_s']}/s, wall {r['wall_s']} s",
                flush=True,
            )
    RESULTS.mkdir(parents=True, exist_ok=True)
    summary = {
        "goal": GOAL,
        "steps": args.steps,
        "load_avg_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        "runs": results,
    }
    (RESULTS / "dial_bench.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        "# DIAL on the switch riddle (3 prisoners), mava_dial.yaml on procs",
        "",
        f"`.venv/bin/python bench/dial_bench.py` — {args.steps:,} executor steps per run, "
        f"{os.cpu_count()} cores, load {summary['load_avg_1m']:.1f}.",
        "",
        "| cachers | final normalised reward | best | reaches 0.9 after | trainer "
        "get_variables calls/s | trainer steps/s | wall time |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        reach = (
            "—"
            if r["reached_goal_s"] is None
            else f"{r['reached_goal_s']:.0f} s ({r['reached_goal_episodes']:,} episodes)"
        )
        lines.append(
            f"| {r['caches']} | {r['final_normalised_reward']:.3f} | "
            f"{r['best_normalised_reward']:.3f} | {reach} | "
            f"{r['trainer_variable_calls_per_s']} | {r['trainer_steps_per_s']:.1f} | "
            f"{r['wall_s']:.0f} s |"
        )
    (RESULTS / "dial_bench.md").write_text("\n".join(lines) + "\n")
    plot(results, RESULTS / "dial_learning.png")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
