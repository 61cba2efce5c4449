"""DIAL on the switch riddle, mava_dial.yaml on procs, several seeds, 3 and 4 prisoners.

Each run is one launch of ``examples/topologies/mava_dial.yaml`` (one cacher) that stops
by itself after ``--steps`` executor steps. From the run's metrics files it takes the
evaluator's normalised reward (greedy policy, messages as hard bits; for 3 prisoners
exactly, over all 729 schedules; for 4, over 1,000 drawn ones) against training episodes
and wall time. Each finished run is merged into bench/results/dial_bench.json (runs of
other prisoner counts and seeds are kept), and dial_bench.md and dial_learning.png are
rewritten from it. Rerun: ``.venv/bin/python bench/dial_bench.py --agents 3 --seeds 0 1 2 3 4``
and ``--agents 4 --seeds 0 --steps 300000``. Per configuration (prisoners, steps) with
several seeds the report gives the interquartile mean over seeds with a 95 % bootstrap
interval (bench/stats.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.stats import iqm_interval  # noqa: E402

RESULTS = ROOT / "bench" / "results"
TOPOLOGY = ROOT / "examples" / "topologies" / "mava_dial.yaml"
GOAL = 0.98
NO_COMMUNICATION = {3: 0.722}  # bench/switch_baseline.py, the best rule without the bulb


def rows(run_dir: Path, node: str) -> list[dict[str, Any]]:
    """The metric rows a node wrote during the run."""
    path = run_dir / "metrics" / f"{node.replace('/', '_')}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def one_run(agents: int, steps: int, seed: int, log_dir: Path) -> dict[str, Any]:
    """Run the topology once; the figures of that run."""
    import topo

    start = time.time()
    run = topo.launch(
        TOPOLOGY,
        backend="procs",
        params={"num_agents": agents, "max_executor_steps": steps, "seed": seed},
        log_dir=log_dir,
    )
    code = run.wait(7200)
    wall = time.time() - start
    evals = rows(run.run_dir, "evaluator")
    trainer = rows(run.run_dir, "trainer")
    curve = [
        {
            "seconds": round(r["time"] - start, 1),
            "episodes": r.get("executor_episodes", 0),
            "normalised_reward": r["normalised_reward"],
        }
        for r in evals
    ]
    reached = next((c for c in curve if c["normalised_reward"] >= GOAL), None)
    scores = [c["normalised_reward"] for c in curve]
    return {
        "agents": agents,
        "seed": seed,
        "steps": steps,
        "exit_code": code,
        "wall_s": round(wall, 1),
        "final_normalised_reward": scores[-1] if scores else None,
        "best_normalised_reward": max(scores, default=None),
        "mean_last_5": statistics.fmean(scores[-5:]) if scores else None,
        "reached_goal_s": None if reached is None else reached["seconds"],
        "reached_goal_episodes": None if reached is None else reached["episodes"],
        "trainer_steps": trainer[-1]["trainer_steps"] if trainer else 0,
        "trainer_steps_per_s": trainer[-1]["steps_per_s"] if trainer else None,
        "load_avg_1m": os.getloadavg()[0],
        "curve": curve,
    }


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Normalised reward against training episodes, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = sorted({r["agents"] for r in results})
    fig, axes = plt.subplots(1, len(counts), figsize=(5.5 * len(counts), 4), squeeze=False)
    for ax, n in zip(axes[0], counts, strict=True):
        for r in (r for r in results if r["agents"] == n):
            xs = [c["episodes"] for c in r["curve"]]
            ys = [c["normalised_reward"] for c in r["curve"]]
            ax.plot(xs, ys, marker=".", label=f"seed {r['seed']}")
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8, label="optimum")
        if n in NO_COMMUNICATION:
            ax.axhline(
                NO_COMMUNICATION[n], color="red", linestyle=":", linewidth=0.8,
                label="best without talking",
            )  # fmt: skip
        ax.set_title(f"{n} prisoners")
        ax.set_xlabel("training episodes")
        ax.set_ylabel("normalised reward (greedy)")
        ax.set_ylim(-0.2, 1.05)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("DIAL on the switch riddle, mava_dial.yaml on procs (2 shared cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def report(results: list[dict[str, Any]]) -> str:
    """The markdown table of every stored run."""
    lines = [
        "# DIAL on the switch riddle, mava_dial.yaml on procs",
        "",
        "`.venv/bin/python bench/dial_bench.py --agents N --seeds ...` — the paper's",
        "training (fresh batches of 32 episodes, soft messages with DRU noise σ = 2 in the",
        "trainer's unroll, 2-layer GRU of 128, RMSProp 5e-4, ε = 0.05, target copied every",
        "100 batches); normalised reward of the greedy policy with hard bits (3 prisoners:",
        "exact over all 729 schedules; 4: 1,000 drawn schedules). 2 cores shared with",
        "other work (load in the table).",
        "",
        "| prisoners | seed | executor steps | final | best | mean of last 5 | "
        f"reaches {GOAL} after | trainer steps | wall | load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in sorted(results, key=lambda r: (r["agents"], r["seed"])):
        reach = (
            "—"
            if r["reached_goal_s"] is None
            else f"{r['reached_goal_s']:.0f} s ({r['reached_goal_episodes']:,} episodes)"
        )
        lines.append(
            f"| {r['agents']} | {r['seed']} | {r['steps']:,} | "
            f"{r['final_normalised_reward']:.3f} | {r['best_normalised_reward']:.3f} | "
            f"{r['mean_last_5']:.3f} | {reach} | {r['trainer_steps']:,} | "
            f"{r['wall_s']:.0f} s | {r['load_avg_1m']:.1f} |"
        )
    lines += summary(results)
    return "\n".join(lines) + "\n"


def summary(results: list[dict[str, Any]]) -> list[str]:
    """Per configuration (prisoners, executor steps) with two or more seeds: the IQM
    [95 % CI] of the final reward and of the time to the goal, and how many reached it."""
    configs = sorted({(r["agents"], r["steps"]) for r in results})
    out = [
        "",
        f"| prisoners | executor steps | seeds | reached {GOAL} | final, IQM [95 % CI] | "
        f"seconds to {GOAL}, IQM [95 % CI] |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    shown = False
    for agents, steps in configs:
        runs = [r for r in results if (r["agents"], r["steps"]) == (agents, steps)]
        if len(runs) < 2:
            continue
        shown = True
        finals = [r["final_normalised_reward"] for r in runs]
        reached = [r["reached_goal_s"] for r in runs if r["reached_goal_s"] is not None]
        # a run that never reached the goal counts as its whole wall time (a lower bound)
        times = [
            r["reached_goal_s"] if r["reached_goal_s"] is not None else r["wall_s"] for r in runs
        ]
        out.append(
            f"| {agents} | {steps:,} | {len(runs)} | "
            f"{len(reached)} of {len(runs)} | "
            f"{iqm_interval(finals).text(3)} | {iqm_interval(times).text(0)} |"
        )
    return out if shown else []


def store(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Merge one run into dial_bench.json (replacing the same prisoners and seed)."""
    path = RESULTS / "dial_bench.json"
    old = json.loads(path.read_text()).get("runs", []) if path.exists() else []
    runs = [r for r in old if "agents" in r and (r["agents"], r["seed"]) != (
        result["agents"], result["seed"])]  # fmt: skip
    runs.append(result)
    path.write_text(json.dumps({"goal": GOAL, "cpus": os.cpu_count(), "runs": runs}, indent=2))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=3, help="prisoners")
    parser.add_argument("--steps", type=int, default=200_000, help="executor steps per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            r = one_run(args.agents, args.steps, seed, Path(tmp))
            print(
                f"{args.agents} prisoners, seed {seed}: exit {r['exit_code']}, final "
                f"{r['final_normalised_reward']}, best {r['best_normalised_reward']}, "
                f"{GOAL} after {r['reached_goal_s']} s, wall {r['wall_s']} s",
                flush=True,
            )
            runs = store(r)
            (RESULTS / "dial_bench.md").write_text(report(runs))
            plot(runs, RESULTS / "dial_learning.png")


if __name__ == "__main__":
    main()
