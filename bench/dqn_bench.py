"""Distributed DQN on CartPole on procs: acme_distributed.yaml (and acme_colocated.yaml).

1. Learning, with 1, 2 and 4 actors (and the colocated layout with 2): each run lasts
   ``--cap-s`` and goes on after the evaluator's mean return over 20 episodes first
   reaches 475: the wall time, actor and learner steps to that point, the learner
   steps/s, and the policy's stability: the mean of the last five evaluations and how
   many evaluations after first reaching 475 fell below it.
2. Actor throughput: env steps/s of one actor inside topo (the learner idle: the replay
   never has enough items to sample, so the actor runs unthrottled and alone) against
   the same ``Actor.run_loop`` in this process with an in-process Reverb server and no
   topo at all.

Writes bench/results/<out>.json, <out>.md and <out>_curve.png (return against wall
time). Full run (~40 min): ``.venv/bin/python bench/dqn_bench.py``; a short one:
``--actors 4 --colocated 2 --cap-s 240 --throughput-s 0``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.dqn_curve import GOAL, evaluations  # noqa: E402

RESULTS = ROOT / "bench" / "results"
TOPOLOGY = ROOT / "examples" / "topologies" / "acme_distributed.yaml"
COLOCATED = ROOT / "examples" / "topologies" / "acme_colocated.yaml"


def learning_run(
    num_actors: int, cap_s: float, log_dir: Path, topology: Path = TOPOLOGY, to_goal: bool = False
) -> dict[str, Any]:
    """Launch, follow the evaluator's log until the cap (with ``to_goal``: until the goal),
    stop; the figures, stability after the goal included."""
    import topo

    params = {
        "num_actors": num_actors,
        "max_actor_steps": None,
        "eval_episodes": 20,
        "eval_every_s": 5.0,
    }
    start = time.monotonic()
    run = topo.launch(topology, backend="procs", params=params, log_dir=log_dir)
    curve: list[dict[str, float]] = []
    reached: dict[str, float] | None = None
    try:
        run.wait_ready(300)
        ready_s = time.monotonic() - start
        ready_at = time.monotonic()  # the cap counts training time, not start-up
        while time.monotonic() - ready_at < cap_s and run.exit_code is None:
            if to_goal and reached is not None:
                break
            time.sleep(1.0)
            curve = [
                {**e, "wall_s": round(ready_s + e["wall_s"], 1)}
                for e in evaluations(run.log("evaluator/0"))
            ]
            reached = next((p for p in curve if p["mean_return"] >= GOAL), None)
    finally:
        code = run.stop(timeout=60)
    last = curve[-1] if curve else {}
    train_s = max(last.get("wall_s", 0.0) - ready_s, 1e-9)
    return {
        "topology": topology.stem,
        "num_actors": num_actors,
        "ready_s": round(ready_s, 1),
        "goal_reached": reached is not None,
        "wall_s_to_goal": None if reached is None else reached["wall_s"],
        "actor_steps_to_goal": None if reached is None else reached["actor_steps"],
        "learner_steps_to_goal": None if reached is None else reached["learner_steps"],
        "best_return": max((p["mean_return"] for p in curve), default=None),
        "learner_steps_per_s": round(last.get("learner_steps", 0) / train_s, 1),
        "actor_steps_per_s": round(last.get("actor_steps", 0) / train_s, 1),
        "exit_code": code,
        **stability([p["mean_return"] for p in curve]),
        "curve": curve,
    }


def stability(returns: list[float]) -> dict[str, Any]:
    """How well the learned policy holds: the mean of the last five evaluations, and of
    the evaluations after the first one to reach the goal, how many fell below it."""
    first = next((i for i, r in enumerate(returns) if r >= GOAL), None)
    after = [] if first is None else returns[first + 1 :]
    return {
        "evaluations": len(returns),
        "mean_last_5": round(sum(returns[-5:]) / len(returns[-5:]), 1) if returns else None,
        "evaluations_after_goal": len(after),
        "below_goal_after_goal": sum(1 for r in after if r < GOAL),
    }


def topo_actor_rate(seconds: float, log_dir: Path) -> float:
    """Env steps/s of one actor inside topo, the learner never sampling."""
    import topo

    params = {
        "num_actors": 1,
        "max_actor_steps": None,
        "samples_per_insert": None,
        "min_replay_size": 10**9,  # the learner waits for ever: the actor is alone
        "eval_every_s": 3600.0,
    }
    run = topo.launch(TOPOLOGY, backend="procs", params=params, log_dir=log_dir)
    try:
        run.wait_ready(300)
        counter = run.handle("counter")
        time.sleep(5.0)  # past the first parameter fetch and the first episodes
        before, t0 = counter.get_counts().get("actor_steps", 0), time.monotonic()
        time.sleep(seconds)
        after, t1 = counter.get_counts().get("actor_steps", 0), time.monotonic()
    finally:
        run.stop(timeout=60)
    return (after - before) / (t1 - t0)


class _Futures:
    def __init__(self, source: LocalSource) -> None:
        self._source = source

    def get_variables(self, names: list[str]) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(self._source.get_variables(names))
        return future


class LocalSource:
    """A variable source in this process (the learner's initial parameters), answering
    ``get_variables`` and ``futures.get_variables`` as a topo handle would."""

    def __init__(self, params: Any) -> None:
        self._params = params
        self.futures = _Futures(self)

    def get_variables(self, names: list[str]) -> list[Any]:
        return [self._params for _ in names]


def plain_actor_rate(seconds: float) -> float:
    """Env steps/s of the same actor loop in this process, without topo."""
    import jax
    import reverb

    from examples.agents.dqn import Actor
    from examples.agents.dqn_core import init_params, make_network, make_replay_tables
    from topo.nodes import Counter

    server = reverb.Server(make_replay_tables(samples_per_insert=None), port=None)
    client = reverb.Client(f"localhost:{server.port}")
    params = jax.device_get(init_params(make_network(), 0))
    actor = Actor(0, client, LocalSource(params), Counter(), 0, num_actors=1)
    stop = threading.Event()
    actor.run_loop(stop, max_steps=2_000)  # warm up like the topo run's first seconds
    before, t0 = actor.steps, time.monotonic()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    actor.run_loop(stop)
    rate = (actor.steps - before) / (time.monotonic() - t0)
    server.stop()
    return rate


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Mean evaluation return against wall time, one line per actor count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in results:
        xs = [p["wall_s"] for p in r["curve"]]
        ys = [p["mean_return"] for p in r["curve"]]
        name = r.get("topology", TOPOLOGY.stem)
        ax.plot(xs, ys, marker=".", label=f"{name}, {r['num_actors']} actor(s)")
    ax.axhline(GOAL, color="grey", linestyle="--", linewidth=1, label=f"goal {GOAL:g}")
    ax.set(
        xlabel="wall time since launch (s)",
        ylabel="mean return (20 episodes)",
        title="Distributed DQN on CartPole-v1, topo procs backend",
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(report: dict[str, Any]) -> str:
    """The results as the markdown table docs/benchmarks.md quotes."""
    lines = [
        "# DQN CartPole (procs backend)",
        "",
        f"Command: `{report['command']}`; each run trains {report['cap_s']:g} s once ready "
        f"(it goes on after reaching 475, to show whether the policy holds); "
        f"{report['cpus']} CPU(s); "
        "evaluations of 20 greedy episodes every 5 s.",
        "",
        "| topology | actors | ready (s) | wall time to 475 (s) | actor steps | learner steps "
        "| learner steps/s | best return | mean of last 5 | below 475 after reaching it |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report["learning"]:
        goal = r["wall_s_to_goal"] if r["goal_reached"] else f"not in {report['cap_s']:g}"
        below = (
            f"{r['below_goal_after_goal']} of {r['evaluations_after_goal']}"
            if r["goal_reached"]
            else "-"
        )
        lines.append(
            f"| {r.get('topology', TOPOLOGY.stem)} | {r['num_actors']} | {r['ready_s']} | {goal} "
            f"| {r['actor_steps_to_goal']} | {r['learner_steps_to_goal']} "
            f"| {r['learner_steps_per_s']} | {r['best_return']} | {r['mean_last_5']} | {below} |"
        )
    t = report["actor_throughput"]
    if t:
        lines += [
            "",
            f"Actor env steps/s: inside topo {t['topo']:.0f}, same loop without topo "
            f"{t['plain']:.0f} (ratio {t['ratio']:.2f}, goal ≥ 0.8).",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    import os

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument(
        "--cap-s", type=float, default=540.0, help="seconds each run trains once ready"
    )
    parser.add_argument("--throughput-s", type=float, default=20.0)
    parser.add_argument("--out", default="dqn_bench", help="results file stem")
    parser.add_argument(
        "--colocated",
        type=int,
        nargs="*",
        default=[2],
        help="actor counts to run acme_colocated.yaml with too (none: skip it)",
    )
    parser.add_argument(
        "--to-goal", action="store_true", help="stop each run at 475 (no stability figures)"
    )
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        learning = []
        runs = [(TOPOLOGY, n) for n in args.actors] + [(COLOCATED, n) for n in args.colocated]
        for topology, n in runs:
            learning.append(learning_run(n, args.cap_s, Path(tmp), topology, args.to_goal))
            print(json.dumps({k: v for k, v in learning[-1].items() if k != "curve"}), flush=True)
        throughput: dict[str, float] = {}
        if args.throughput_s > 0:
            topo_rate = topo_actor_rate(args.throughput_s, Path(tmp))
            plain_rate = plain_actor_rate(args.throughput_s)
            throughput = {"topo": topo_rate, "plain": plain_rate, "ratio": topo_rate / plain_rate}
            print(json.dumps(throughput), flush=True)
    report = {
        "command": "python bench/dqn_bench.py " + " ".join(sys.argv[1:]),
        "cap_s": args.cap_s,
        "cpus": os.cpu_count(),
        "learning": learning,
        "actor_throughput": throughput,
    }
    (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=1) + "\n")
    (RESULTS / f"{args.out}.md").write_text(markdown(report))
    plot(learning, RESULTS / f"{args.out}_curve.png")
    print(markdown(report))


if __name__ == "__main__":
    main()
