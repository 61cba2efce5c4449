"""Offline RL on CartPole: behaviour cloning against filtered BC and CRR on one dataset.

The dataset is acme_offline.yaml's default: ``--episodes`` episodes played by the stated
mix of behaviour policies (examples/agents/demonstrations.py: 10 % a good controller
ε-greedy at 0.1, 60 % a mediocre one ε-greedy at 0.1, 30 % random). For each learner and
each seed, the offline agent's own ``Learner`` (examples/agents/offline.py, the code the
topology runs) trains in this process on that one dataset; at each checkpoint of learner
steps its greedy policy plays ``--eval-episodes`` episodes on fixed seeds. The report
sets the returns against the dataset's best behaviour policy and its mean episode.
Writes bench/results/offline_bench.json, .md and .png.
Rerun: ``.venv/bin/python bench/offline_bench.py`` (about ten minutes on 2 quiet cores).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
EVAL_SEED = 10_000  # evaluation episodes use seeds EVAL_SEED, EVAL_SEED + 1, ...
LABELS = {"bc": "behaviour cloning", "filtered_bc": "filtered BC (top 20 %)", "crr": "CRR (exp)"}


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def agent_modules() -> SimpleNamespace:
    """examples.agents' offline, demonstrations and common modules (haiku installs an
    ``examples`` package of its own, which topo's target loader steps around)."""
    from topo.targets import prepare

    why = prepare(str(ROOT / "examples" / "topologies" / "acme_offline.yaml"), "examples.agents")
    assert why is None, why
    names = ("offline", "demonstrations", "common")
    return SimpleNamespace(**{n: importlib.import_module(f"examples.agents.{n}") for n in names})


def curve(
    agents: SimpleNamespace, data: Any, learner_name: str, seed: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Train one learner on the dataset; its evaluation return at every checkpoint."""
    offline, common = agents.offline, agents.common
    learner = offline.Learner(
        [0, seed],
        dataset=lambda key, **_: agents.demonstrations.batches(data, args.batch_size, seed),
        algorithm=learner_name,
        learning_rate=args.learning_rate,
        print_every_s=1e9,
    )
    env = common.make_environment(seed)
    points, train_s = [], 0.0
    for target in args.steps:
        start = time.perf_counter()
        learner.run(num_steps=target - learner.steps)
        train_s += time.perf_counter() - start
        [params] = learner.get_variables(["policy"])
        policy = offline.greedy_policy(params)
        returns = [
            common.run_episode(env, policy, EVAL_SEED + i) for i in range(args.eval_episodes)
        ]
        points.append(
            {"steps": learner.steps, "mean": statistics.fmean(returns), "min": min(returns)}
        )
    return {
        "learner": learner_name,
        "seed": seed,
        "steps_per_s": learner.steps / max(train_s, 1e-9),
        "points": points,
    }


def final_means(result: dict[str, Any], name: str) -> list[float]:
    return [r["points"][-1]["mean"] for r in result["runs"] if r["learner"] == name]


def plot(result: dict[str, Any], path: Path) -> None:
    """Mean return against learner steps, one line per learner (mean and range over seeds),
    with the dataset's best and mean behaviour as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name in result["learners"]:
        rows = [r for r in result["runs"] if r["learner"] == name]
        steps = [max(p["steps"], 1) for p in rows[0]["points"]]
        per_point = [[r["points"][i]["mean"] for r in rows] for i in range(len(steps))]
        line = ax.plot(steps, [statistics.fmean(v) for v in per_point], marker="o", ms=3)
        ax.fill_between(
            steps,
            [min(v) for v in per_point],
            [max(v) for v in per_point],
            alpha=0.15,
            color=line[0].get_color(),
        )
        line[0].set_label(LABELS.get(name, name))
    data = result["dataset"]
    ax.axhline(data["best_policy_return"], color="k", ls="--", lw=1, label="best policy in data")
    ax.axhline(data["mean_episode_return"], color="grey", ls=":", lw=1, label="dataset mean")
    ax.set_xscale("log")
    ax.set_xlabel(f"learner steps (batch {result['batch_size']}; step 0 drawn at 1)")
    ax.set_ylabel(f"mean return over {result['eval_episodes']} episodes")
    ax.set_title("Offline RL on CartPole-v1, one mixed dataset (examples/agents/offline.py)")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(result: dict[str, Any]) -> list[str]:
    data = result["dataset"]
    steps = [p["steps"] for p in result["runs"][0]["points"]]
    behaviours = ", ".join(
        f"{name} {b['episodes']} episodes, mean return {b['mean_return']:.1f}"
        for name, b in data["behaviours"].items()
    )
    lines = [
        "# Offline RL on CartPole: "
        + ", ".join(LABELS.get(n, n) for n in result["learners"])
        + " on one mixed dataset",
        "",
        f"`.venv/bin/python bench/offline_bench.py` — one dataset of {data['episodes']} "
        f"episodes ({data['transitions']} transitions; {data['mix']}): {behaviours}. "
        f"Best policy in the data: {data['best_policy_return']:.1f}; mean episode "
        f"{data['mean_episode_return']:.1f}. Each learner (haiku MLP [64, 64], adam "
        f"{result['learning_rate']:g}, batch {result['batch_size']}) trains in-process on it; "
        f"mean return of its greedy policy over {result['eval_episodes']} episodes (fixed "
        f"seeds), mean over seeds {result['seeds']} (min–max in brackets at the end).",
        "",
        "| learner | " + " | ".join(f"{s} steps" for s in steps) + " | vs best | vs mean |",
        "| --- | " + " | ".join("---:" for _ in steps) + " | ---: | ---: |",
    ]
    for name in result["learners"]:
        rows = [r for r in result["runs"] if r["learner"] == name]
        means = [statistics.fmean(r["points"][i]["mean"] for r in rows) for i in range(len(steps))]
        last = final_means(result, name)
        cells = [f"{m:.1f}" for m in means[:-1]]
        cells.append(f"{means[-1]:.1f} ({min(last):.0f}–{max(last):.0f})")
        lines.append(
            f"| {LABELS.get(name, name)} | "
            + " | ".join(cells)
            + f" | {means[-1] / data['best_policy_return']:.0%} | "
            f"{means[-1] / data['mean_episode_return']:.1f}× |"
        )
    rates = {
        LABELS.get(n, n): statistics.fmean(
            r["steps_per_s"] for r in result["runs"] if r["learner"] == n
        )
        for n in result["learners"]
    }
    speed = ", ".join(f"{k} {v:.0f}" for k, v in rates.items())
    lines += [
        "",
        f"Learner steps/s in this process: {speed}. Wall time {result['wall_s']:.0f} s; load "
        f"average (1 min) at the end {result['load_avg_1m']:.1f} on {os.cpu_count()} CPUs.",
        "",
        "![learning curves](offline_bench.png)",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--learners", default="bc,filtered_bc,crr")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--dataset-seed", type=int, default=0)
    parser.add_argument("--seeds", type=ints, default=ints("0,1,2"))
    parser.add_argument("--steps", type=ints, default=ints("0,250,500,1000,2000"))
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    args = parser.parse_args()
    agents = agent_modules()
    start = time.perf_counter()
    demos = agents.demonstrations
    data = demos.record_episodes(args.episodes, args.dataset_seed)
    by_policy = data.returns_by_policy()
    dataset = {
        "episodes": args.episodes,
        "transitions": len(data),
        "mix": demos.describe(),
        "behaviours": {
            n: {"episodes": len(r), "mean_return": float(r.mean())} for n, r in by_policy.items()
        },
        "best_policy_return": max(float(r.mean()) for r in by_policy.values()),
        "mean_episode_return": float(data.episode_return.mean()),
    }
    learners = [n for n in args.learners.split(",") if n]
    runs = []
    for name in learners:
        for seed in args.seeds:
            runs.append(curve(agents, data, name, seed, args))
            print(f"{name}, seed {seed}: {runs[-1]['points'][-1]['mean']:.1f}", flush=True)
    result = {
        "dataset": dataset,
        "learners": learners,
        "eval_episodes": args.eval_episodes,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "seeds": args.seeds,
        "wall_s": time.perf_counter() - start,
        "load_avg_1m": os.getloadavg()[0],
        "runs": runs,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "offline_bench.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "offline_bench.png")
    lines = report(result)
    (RESULTS / "offline_bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
