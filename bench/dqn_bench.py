"""Distributed DQN on procs, over seeds: how fast and how surely the examples learn, and
what distributing costs an actor.

1. Learning: each configuration (a topology, its actors, an environment and its goal)
   runs once per seed. A run stops by itself once three evaluations in a row reach the
   goal (``-p stop_at_return=GOAL -p stop_at_return_for=3``: solved), or at its actor
   step budget. Every evaluation plays the same 10 held-out episodes (``-p eval_seed``),
   whatever the run's seed. Per run: solved or not, actor steps and wall time to the
   first evaluation at the goal, the last evaluation. Per configuration: the interquartile
   mean over seeds with a 95 % bootstrap interval (bench/stats.py); a run that never
   reached the goal counts as its whole budget (the figure is then a lower bound).
2. Actor throughput: env steps/s of one actor inside topo (its learner never samples:
   the actor runs unthrottled and alone) against the same ``Actor.run_loop`` without
   topo, its Reverb server in a process of its own as topo's is (what differs is what
   distributing adds: parameters fetched and steps counted through other nodes, topo's
   transport). Rounds interleaved, the ratio taken per round, the median reported.

Writes bench/results/<out>.json, <out>.md and <out>_curve.png. Rerun:
``.venv/bin/python bench/dqn_bench.py`` (5 seeds of 3 configurations and 3 throughput
rounds: about 40 minutes on 2 quiet cores).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.dqn_curve import evaluations  # noqa: E402
from bench.stats import fraction_at_least, iqm_interval  # noqa: E402

RESULTS = ROOT / "bench" / "results"
TOPOLOGY = ROOT / "examples" / "topologies" / "acme_distributed.yaml"
COLOCATED = ROOT / "examples" / "topologies" / "acme_colocated.yaml"
EVAL_SEED = 1_000_000  # held out: the actors' episodes are seeded from the program seed


@dataclass(frozen=True)
class Config:
    """One learning configuration: a topology, its parameters, the goal and the budget."""

    name: str
    topology: Path
    goal: float
    budget: int  # actor steps
    params: dict[str, Any] = field(default_factory=dict)


CONFIGS = {
    c.name: c
    for c in (
        # the main job's settings (./dev run): two actors leave a core to the learner
        Config("cartpole-distributed-2", TOPOLOGY, 475.0, 200_000, {"num_actors": 2}),
        Config("cartpole-colocated-2", COLOCATED, 475.0, 200_000, {"num_actors": 2}),
        # Acrobot's "solved" threshold in gym's registry is -100
        Config(
            "acrobot-distributed-2",
            TOPOLOGY,
            -100.0,
            150_000,
            {"num_actors": 2, "env": "Acrobot-v1"},
        ),
    )
}


def learning_run(config: Config, seed: int, cap_s: float, log_dir: Path) -> dict[str, Any]:
    """Launch one seed of ``config``, wait for it to stop by itself (or ``cap_s`` once
    ready), and read its evaluator's log."""
    import topo

    params = {
        **config.params,
        "seed": seed,
        "max_actor_steps": config.budget,
        "eval_episodes": 10,
        "eval_every_s": 5.0,
        "eval_seed": EVAL_SEED,
        "stop_at_return": config.goal,
        "stop_at_return_for": 3,
    }
    start = time.monotonic()
    run = topo.launch(config.topology, backend="procs", params=params, log_dir=log_dir)
    try:
        run.wait_ready(300)
        ready_s = time.monotonic() - start
        ready_at = time.monotonic()
        while run.exit_code is None and time.monotonic() - ready_at < cap_s:
            time.sleep(1.0)
        curve = evaluations(run.log("evaluator/0"))
    finally:
        code = run.stop(timeout=60)
    wall_s = time.monotonic() - start
    first = next((p for p in curve if p["mean_return"] >= config.goal), None)
    returns = [p["mean_return"] for p in curve]
    solved = len(returns) >= 3 and all(r >= config.goal for r in returns[-3:])
    return {
        "config": config.name,
        "seed": seed,
        "ready_s": round(ready_s, 1),
        "wall_s": round(wall_s, 1),
        "solved": solved,
        "actor_steps_to_goal": None if first is None else first["actor_steps"],
        "wall_s_to_goal": None if first is None else round(ready_s + first["wall_s"], 1),
        "last_return": returns[-1] if returns else None,
        "best_return": max(returns, default=None),
        "actor_steps": curve[-1]["actor_steps"] if curve else 0,
        "learner_steps": curve[-1]["learner_steps"] if curve else 0,
        "exit_code": code,
        "curve": curve,
    }


def summary(config: Config, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """IQM [95 % CI] over seeds of the steps and the time to the goal and of the last
    evaluation; runs that never reached the goal count as their budget (steps) or their
    whole wall time."""
    steps = [
        r["actor_steps_to_goal"] if r["actor_steps_to_goal"] is not None else config.budget
        for r in runs
    ]
    walls = [r["wall_s_to_goal"] if r["wall_s_to_goal"] is not None else r["wall_s"] for r in runs]
    last = [r["last_return"] if r["last_return"] is not None else float("nan") for r in runs]
    return {
        "config": config.name,
        "seeds": [r["seed"] for r in runs],
        "solved": fraction_at_least([1.0 if r["solved"] else 0.0 for r in runs], 1.0),
        "failed": sum(r["exit_code"] != 0 for r in runs),
        "reached_goal": sum(r["actor_steps_to_goal"] is not None for r in runs),
        "actor_steps_to_goal": iqm_interval(steps).__dict__,
        "wall_s_to_goal": iqm_interval(walls).__dict__,
        "last_return": iqm_interval(last).__dict__,
    }


# -- actor throughput ---------------------------------------------------------------------


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


def _serve_replay(port: Any, stop: Any) -> None:
    """A process of its own: the same replay tables topo's replay node serves."""
    import reverb

    from examples.agents.dqn_core import make_replay_tables

    server = reverb.Server(make_replay_tables(samples_per_insert=None), port=None)
    port.value = server.port
    stop.wait()
    server.stop()


def plain_actor_rate(seconds: float) -> float:
    """Env steps/s of the same actor loop without topo, its replay in another process."""
    import jax
    import reverb

    from examples.agents.dqn import Actor
    from examples.agents.dqn_core import init_params, make_network
    from topo.nodes import Counter

    ctx = multiprocessing.get_context("spawn")
    port, stop_server = ctx.Value("i", 0), ctx.Event()
    server = ctx.Process(target=_serve_replay, args=(port, stop_server), daemon=True)
    server.start()
    try:
        while port.value == 0:
            if not server.is_alive():
                raise RuntimeError("the baseline's Reverb server did not start")
            time.sleep(0.05)
        client = reverb.Client(f"localhost:{port.value}")
        params = jax.device_get(init_params(make_network(), 0))
        actor = Actor(0, client, LocalSource(params), Counter(), 0, num_actors=1)
        stop = threading.Event()
        actor.run_loop(stop, max_steps=2_000)  # warm up like the topo run's first seconds
        before, t0 = actor.steps, time.monotonic()
        timer = threading.Timer(seconds, stop.set)
        timer.start()
        actor.run_loop(stop)
        return (actor.steps - before) / (time.monotonic() - t0)
    finally:
        stop_server.set()
        server.join(30)
        if server.is_alive():
            server.kill()
            server.join()


def throughput(rounds: int, seconds: float, log_dir: Path) -> dict[str, Any]:
    """Interleaved rounds of both, the ratio per round, the median."""
    rows = []
    for i in range(rounds):
        first_topo = i % 2 == 0
        a = topo_actor_rate(seconds, log_dir) if first_topo else plain_actor_rate(seconds)
        b = plain_actor_rate(seconds) if first_topo else topo_actor_rate(seconds, log_dir)
        topo_rate, plain_rate = (a, b) if first_topo else (b, a)
        rows.append({"topo": topo_rate, "plain": plain_rate, "ratio": topo_rate / plain_rate})
        print(json.dumps(rows[-1]), flush=True)
    return {
        "rounds": rows,
        "topo": statistics.median(r["topo"] for r in rows),
        "plain": statistics.median(r["plain"] for r in rows),
        "ratio": statistics.median(r["ratio"] for r in rows),
    }


# -- report ---------------------------------------------------------------------------------


def plot(report: dict[str, Any], path: Path) -> None:
    """Each run's evaluations against actor steps, one panel per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s["config"] for s in report["summaries"]]
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        goal = CONFIGS[name].goal
        for r in (r for r in report["runs"] if r["config"] == name):
            xs = [p["actor_steps"] for p in r["curve"]]
            ys = [p["mean_return"] for p in r["curve"]]
            ax.plot(xs, ys, marker=".", ms=3, lw=1, label=f"seed {r['seed']}")
        ax.axhline(goal, color="grey", ls="--", lw=1, label=f"goal {goal:g}")
        ax.set(xlabel="actor steps", ylabel="mean return (10 held-out episodes)", title=name)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cell(interval: dict[str, float], digits: int = 0) -> str:
    value, low, high = (f"{interval[k]:,.{digits}f}" for k in ("value", "low", "high"))
    return f"{value} [{low}, {high}]"


def markdown(report: dict[str, Any]) -> str:
    """The results as the tables docs/benchmarks.md quotes."""
    lines = [
        "# Distributed DQN over seeds (procs backend)",
        "",
        f"Command: `{report['command']}`. {report['cpus']} CPUs; load average (1 min) "
        f"{report['load_start']:.1f} at the start, {report['load_end']:.1f} at the end; "
        f"{report['wall_s'] / 60:.0f} minutes in all.",
        "",
        "Each run stops by itself once three evaluations in a row reach the goal (solved) or "
        "at its actor-step budget; every evaluation plays the same 10 held-out episodes "
        f"(seeds {EVAL_SEED:,}…). Figures: interquartile mean over the seeds [95 % "
        "bootstrap interval]; a run that never reached the goal counts as its budget (its "
        "steps) and its whole wall time; a failed run (exit not 0) is counted so too.",
        "",
        "| configuration | seeds | solved | actor steps to the goal | wall s to the goal "
        "(from launch) | last evaluation |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in report["summaries"]:
        lines.append(
            f"| {s['config']} (goal {CONFIGS[s['config']].goal:g}, budget "
            f"{CONFIGS[s['config']].budget:,}) | {len(s['seeds'])} | {s['solved']}"
            + (f" ({s['failed']} failed)" if s.get("failed") else "")
            + " "
            f"| {_cell(s['actor_steps_to_goal'])} | {_cell(s['wall_s_to_goal'])} "
            f"| {_cell(s['last_return'], 1)} |"
        )
    lines += [
        "",
        "| configuration | seed | solved | actor steps to the goal | wall s to the goal | "
        "last evaluation | best | learner steps | wall s | exit |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report["runs"]:
        lines.append(
            f"| {r['config']} | {r['seed']} | {'yes' if r['solved'] else 'no'} "
            f"| {r['actor_steps_to_goal'] if r['actor_steps_to_goal'] is not None else '-'} "
            f"| {r['wall_s_to_goal'] if r['wall_s_to_goal'] is not None else '-'} "
            f"| {r['last_return']} | {r['best_return']} | {r['learner_steps']} | {r['wall_s']} "
            f"| {r['exit_code']} |"
        )
    t = report["actor_throughput"]
    if t:
        per_round = ", ".join(f"{r['ratio']:.2f}" for r in t["rounds"])
        lines += [
            "",
            f"Actor env steps/s, one actor, its learner never sampling (medians of "
            f"{len(t['rounds'])} interleaved rounds): inside topo {t['topo']:,.0f}, the same "
            f"loop without topo with its Reverb server in a process of its own "
            f"{t['plain']:,.0f}; ratio **{t['ratio']:.2f}** (per round: {per_round}).",
        ]
    lines += ["", f"![curves]({report['out']}_curve.png)"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--cap-s", type=float, default=600.0, help="seconds a run may train once ready"
    )
    parser.add_argument("--throughput-rounds", type=int, default=3)
    parser.add_argument("--throughput-s", type=float, default=15.0)
    parser.add_argument("--out", default="dqn_bench", help="results file stem")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="write <out>.md and the plot again from <out>.json (no runs)",
    )
    args = parser.parse_args()
    if args.report_only:
        report = json.loads((RESULTS / f"{args.out}.json").read_text())
        for s in report["summaries"]:
            s["failed"] = sum(
                r["exit_code"] != 0 for r in report["runs"] if r["config"] == s["config"]
            )
        (RESULTS / f"{args.out}.md").write_text(markdown(report))
        plot(report, RESULTS / f"{args.out}_curve.png")
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    start, load_start = time.monotonic(), os.getloadavg()[0]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.configs:
            for seed in args.seeds:
                runs.append(learning_run(CONFIGS[name], seed, args.cap_s, Path(tmp)))
                print(json.dumps({k: v for k, v in runs[-1].items() if k != "curve"}), flush=True)
        rate = (
            throughput(args.throughput_rounds, args.throughput_s, Path(tmp))
            if args.throughput_rounds > 0
            else {}
        )
    report = {
        "command": ".venv/bin/python bench/dqn_bench.py " + " ".join(sys.argv[1:]),
        "out": args.out,
        "cpus": os.cpu_count(),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
        "wall_s": time.monotonic() - start,
        "summaries": [
            summary(CONFIGS[n], [r for r in runs if r["config"] == n]) for n in args.configs
        ],
        "runs": runs,
        "actor_throughput": rate,
    }
    (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=1) + "\n")
    (RESULTS / f"{args.out}.md").write_text(markdown(report))
    plot(report, RESULTS / f"{args.out}_curve.png")
    print(markdown(report))


if __name__ == "__main__":
    main()
