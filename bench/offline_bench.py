"""Behaviour cloning on CartPole: the return it reaches against the scripted expert's.

For each demonstration dataset (episodes the expert played, with and without the
exploration noise acme_offline.yaml uses) and each seed, the offline agent's own
``Learner`` (examples/agents/offline.py, the code the topology runs) trains in this
process; at each checkpoint of learner steps its greedy policy plays ``--eval-episodes``
CartPole episodes on fixed seeds, and the expert plays the same episodes. Writes
bench/results/offline_bench.json, .md and .png (the learning curves).
Rerun: ``.venv/bin/python bench/offline_bench.py`` (a few minutes on 2 cores).
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
EVAL_SEED = 10_000  # evaluation episodes use seeds EVAL_SEED, EVAL_SEED + 1, ...


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def agent_modules() -> SimpleNamespace:
    """examples.agents' offline, demonstrations and common modules (haiku installs an
    ``examples`` package of its own, which topo's target loader steps around)."""
    from topo.targets import prepare

    why = prepare(str(ROOT / "examples" / "topologies" / "acme_offline.yaml"), "examples.agents")
    assert why is None, why
    names = ("offline", "demonstrations", "common")
    return SimpleNamespace(**{n: importlib.import_module(f"examples.agents.{n}") for n in names})


def curve(
    agents: SimpleNamespace, episodes: int, noise: float, seed: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Train one learner on one dataset; its evaluation return at every checkpoint."""
    offline, common = agents.offline, agents.common
    demos = agents.demonstrations.make_demonstrations(episodes, seed, noise)
    learner = offline.Learner(
        [0, seed],
        dataset=lambda key, **_: agents.demonstrations.batches(demos, args.batch_size, seed),
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
        returns = [
            common.run_episode(env, offline.greedy_policy(params), EVAL_SEED + i)
            for i in range(args.eval_episodes)
        ]
        points.append(
            {"steps": learner.steps, "mean": statistics.fmean(returns), "min": min(returns)}
        )
    return {
        "episodes": episodes,
        "noise": noise,
        "seed": seed,
        "transitions": len(demos),
        "demonstrator_return": float(demos.episode_returns.mean()),
        "steps_per_s": learner.steps / max(train_s, 1e-9),
        "points": points,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    """Mean return against learner steps, one line per dataset (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, rows in grouped(result["runs"]).items():
        steps = [p["steps"] for p in rows[0]["points"]]
        means = [statistics.fmean(r["points"][i]["mean"] for r in rows) for i in range(len(steps))]
        ax.plot([max(s, 1) for s in steps], means, marker="o", ms=3, label=label)
    ax.axhline(result["expert_return"], color="k", ls="--", lw=1, label="scripted expert")
    ax.axhline(result["random_return"], color="grey", ls=":", lw=1, label="random policy")
    ax.set_xscale("log")
    ax.set_xlabel(f"learner steps (batch {result['batch_size']}; step 0 drawn at 1)")
    ax.set_ylabel(f"mean return over {result['eval_episodes']} episodes")
    ax.set_title("Behaviour cloning on CartPole-v1 (examples/agents/offline.py)")
    ax.legend(fontsize=8, loc="center right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def grouped(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        label = f"{run['episodes']} demo episodes, noise {run['noise']:g}"
        out.setdefault(label, []).append(run)
    return out


def report(result: dict[str, Any]) -> list[str]:
    steps = [p["steps"] for p in result["runs"][0]["points"]]
    lines = [
        "# Offline agent: behaviour cloning against the scripted expert (CartPole-v1)",
        "",
        f"`.venv/bin/python bench/offline_bench.py` — the offline agent's Learner "
        f"(haiku MLP {result['hidden_sizes']}, adam {result['learning_rate']:g}, batch "
        f"{result['batch_size']}) trained in-process; mean return of its greedy policy over "
        f"{result['eval_episodes']} episodes (fixed seeds), mean over seeds "
        f"{result['seeds']}. The expert scores {result['expert_return']:.1f} on the same "
        f"episodes, a random policy {result['random_return']:.1f}.",
        "",
        "| dataset | transitions | demonstrator | "
        + " | ".join(f"{s} steps" for s in steps)
        + " |",
        "| --- | ---: | ---: | " + " | ".join("---:" for _ in steps) + " |",
    ]
    for label, rows in grouped(result["runs"]).items():
        means = [statistics.fmean(r["points"][i]["mean"] for r in rows) for i in range(len(steps))]
        transitions = statistics.fmean(r["transitions"] for r in rows)
        demonstrator = statistics.fmean(r["demonstrator_return"] for r in rows)
        lines.append(
            f"| {label} | {transitions:.0f} | {demonstrator:.1f} | "
            + " | ".join(f"{m:.1f}" for m in means)
            + " |"
        )
    rate = statistics.fmean(r["steps_per_s"] for r in result["runs"])
    lines += [
        "",
        f"Learner speed in this process: {rate:.0f} steps/s. Wall time {result['wall_s']:.0f} s; "
        f"load average (1 min) at the end {result['load_avg_1m']:.1f} on {os.cpu_count()} CPUs.",
        "",
        "![learning curves](offline_bench.png)",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=ints, default=ints("1,5,20"))
    parser.add_argument("--noise", type=floats, default=floats("0,0.3"))
    parser.add_argument("--seeds", type=ints, default=ints("0,1,2"))
    parser.add_argument(
        "--steps", type=ints, default=ints("0,25,50,100,200,400,800,1600,3200,10000")
    )
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    args = parser.parse_args()
    agents = agent_modules()
    common = agents.common
    start = time.perf_counter()
    env = common.make_environment(0)
    episodes = range(args.eval_episodes)
    expert = statistics.fmean(
        common.run_episode(env, common.expert_action, EVAL_SEED + i) for i in episodes
    )
    rng = np.random.default_rng(0)
    random_return = statistics.fmean(
        common.run_episode(env, lambda _: int(rng.integers(2)), EVAL_SEED + i) for i in episodes
    )
    runs = []
    for n in args.episodes:
        for noise in args.noise:
            for seed in args.seeds:
                runs.append(curve(agents, n, noise, seed, args))
                last = runs[-1]["points"][-1]
                print(f"{n} episodes, noise {noise:g}, seed {seed}: {last['mean']:.1f}", flush=True)
    result = {
        "expert_return": expert,
        "random_return": random_return,
        "eval_episodes": args.eval_episodes,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "hidden_sizes": [64, 64],
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
