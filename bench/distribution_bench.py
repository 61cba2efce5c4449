"""What distributing costs the DQN agent: the whole system on procs against the same work
in one process without topo, on the same cores (issue 46).

* *topo*: ``examples/topologies/acme_distributed.yaml`` on procs, ``--actors`` actors,
  no step budget, its evaluator idle (an evaluation an hour) and no snapshots: replay,
  counter, learner and actors each in a process of their own, calling each other over
  topo's transport as a user's run does.
* *one process*: the same objects without topo, in one fresh interpreter: the Reverb
  server with the same tables (rate limiter included), the same ``Learner`` stepping on
  batches sampled from it (a sampler thread feeding a queue of two, as the learner node
  does) and sending its new priorities to it, and the same ``Actor`` loops in threads,
  their parameters read from that learner directly and their steps counted locally.

Both run a warm-up (past the replay's minimum size and the first JIT compiles), then a
window over which the actors' environment steps and the learner's updates per second
are counted. Rounds alternate which side goes first; the ratio (topo over one process)
is taken per round, the median reported. The rate limiter (``samples_per_insert``)
couples the two rates, as it does in training.

Run from the repository root: ``.venv/bin/python bench/distribution_bench.py
[--actors 2] [--rounds 3] [--warmup 20] [--seconds 30]``. Writes
bench/results/distribution.json and .md (``--out``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TOPOLOGY = ROOT / "examples" / "topologies" / "acme_distributed.yaml"
SPI = 32.0  # the example's samples_per_insert (its default)


def topo_rates(actors: int, warmup: float, seconds: float, log_dir: Path) -> dict[str, float]:
    """Actor steps/s and learner steps/s of the example on procs, read from its counter."""
    import topo

    params = {
        "num_actors": actors,
        "max_actor_steps": None,
        "eval_every_s": 3600.0,
        "checkpoint_every_s": None,
        "samples_per_insert": SPI,
    }
    run = topo.launch(TOPOLOGY, backend="procs", params=params, log_dir=log_dir)
    try:
        assert run.wait_ready(300), run.failure
        counter = run.handle("counter")
        time.sleep(warmup)
        before, t0 = counter.get_counts(), time.monotonic()
        time.sleep(seconds)
        after, t1 = counter.get_counts(), time.monotonic()
    finally:
        run.stop(timeout=60)
    span = t1 - t0
    return {
        "actor_steps_per_s": (after.get("actor_steps", 0) - before.get("actor_steps", 0)) / span,
        "learner_steps_per_s": (after.get("learner_steps", 0) - before.get("learner_steps", 0))
        / span,
    }


class _Futures:
    def __init__(self, learner: Any) -> None:
        self._learner = learner

    def get_variables(self, names: list[str]) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(self._learner.get_variables(names))
        return future


class LiveSource:
    """The learner itself as the actors' variable source (``get_variables`` and
    ``futures.get_variables``, as a topo handle answers them)."""

    def __init__(self, learner: Any) -> None:
        self._learner = learner
        self.futures = _Futures(learner)

    def get_variables(self, names: list[str]) -> Any:
        return self._learner.get_variables(names)


def _serve_replay(port: Any, stop: Any) -> None:
    """The replay in a process of its own (``--replay-apart``): the same tables."""
    import reverb

    from examples.agents.dqn import make_replay_tables

    server = reverb.Server(make_replay_tables(samples_per_insert=SPI), port=None)
    port.value = server.port
    stop.wait()
    server.stop()


def one_process(actors: int, warmup: float, seconds: float, out: Any, port: Any) -> None:
    """The same work without topo, in this (fresh) process; the rates put on ``out``.
    With ``port`` set, the Reverb server listening there (in another process) is used
    instead of one in this process (Reverb then reaches its tables over gRPC, as topo's
    nodes do, not directly)."""
    import reverb

    from examples.agents.dqn import Actor, Learner, make_replay_tables
    from examples.agents.dqn_core import flat_batch, replay_dataset
    from topo.nodes import Counter

    server = None
    if port is None:
        server = reverb.Server(make_replay_tables(samples_per_insert=SPI), port=None)
    address = f"localhost:{port if server is None else server.port}"
    client = reverb.Client(address)
    learner = Learner(0, client)
    source = LiveSource(learner)
    stop = threading.Event()
    team = [Actor(i, client, source, Counter(), i, num_actors=actors) for i in range(actors)]
    batches: queue.Queue[Any] = queue.Queue(maxsize=2)

    def sample() -> None:
        iterator = replay_dataset(address, 64)
        while not stop.is_set():
            try:
                batch = next(iterator)
            except StopIteration:  # the rate limiter held the sample back
                iterator = replay_dataset(address, 64)
                continue
            while not stop.is_set():
                try:
                    batches.put(batch, timeout=0.5)
                    break
                except queue.Full:
                    continue

    def learn() -> None:
        while not stop.is_set():
            try:
                s = batches.get(timeout=0.05)
            except queue.Empty:
                continue
            learner.update(flat_batch(s.data), s.info.probability, s.info.key)

    threads = [threading.Thread(target=a.run_loop, args=(stop,), daemon=True) for a in team]
    threads += [threading.Thread(target=f, daemon=True) for f in (sample, learn)]
    for t in threads:
        t.start()
    time.sleep(warmup)
    a0, l0, t0 = sum(a.steps for a in team), learner.steps, time.monotonic()
    time.sleep(seconds)
    a1, l1, t1 = sum(a.steps for a in team), learner.steps, time.monotonic()
    span = t1 - t0
    out.put({"actor_steps_per_s": (a1 - a0) / span, "learner_steps_per_s": (l1 - l0) / span})
    out.close()
    out.join_thread()  # the queue's feeder thread has written the result (os._exit next)
    stop.set()
    if server is not None:
        server.stop()
    os._exit(0)  # daemon threads blocked in Reverb calls must not hold the exit


def one_process_rates(
    actors: int, warmup: float, seconds: float, replay_apart: bool = False
) -> dict[str, float]:
    """``one_process`` in a fresh interpreter (and its replay in another one, if apart)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    server = None
    port: Any = None
    if replay_apart:
        value, stop = ctx.Value("i", 0), ctx.Event()
        server = ctx.Process(target=_serve_replay, args=(value, stop), daemon=True)
        server.start()
        while value.value == 0:
            if not server.is_alive():
                raise RuntimeError("the replay's process did not start")
            time.sleep(0.05)
        port = value.value
    child = ctx.Process(target=one_process, args=(actors, warmup, seconds, out, port))
    child.start()
    try:
        return dict(out.get(timeout=warmup + seconds + 300))
    finally:
        child.join(60)
        if child.is_alive():
            child.kill()
            child.join()
        if server is not None:
            stop.set()
            server.join(30)
            if server.is_alive():
                server.kill()
                server.join()


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# What distributing costs the DQN agent (bench/distribution_bench.py)",
        "",
        f"`{result['command']}` -- {result['time']}, {os.cpu_count()} CPUs (shared). "
        f"{result['actors']} actors, samples_per_insert {SPI:g}, a {result['warmup']:g} s "
        f"warm-up then {result['seconds']:g} s counted, {len(result['rounds'])} rounds, "
        "each side going first in turn. *topo*: acme_distributed on procs (each node a "
        "process); *one process*: the same Reverb tables, Learner and Actor loops as threads "
        "of one process without topo (Reverb then reaches its tables directly, not over "
        "gRPC); *replay apart*: the same, the Reverb server in a process of its own.",
        "",
        "| round | side | actor steps/s | learner steps/s | topo ÷ it (actors) |",
        "| ---: | --- | ---: | ---: | ---: |",
    ]
    names = {"topo": "topo", "one_process": "one process", "replay_apart": "replay apart"}
    for i, r in enumerate(result["rounds"], 1):
        for side, name in names.items():
            ratio = "" if side == "topo" else f"{r[f'actor_ratio_{side}']:.2f}×"
            lines.append(
                f"| {i} | {name} | {r[side]['actor_steps_per_s']:,.0f} "
                f"| {r[side]['learner_steps_per_s']:,.1f} | {ratio} |"
            )
    lines += [
        "",
        "Median ratio, topo over one process: actor steps "
        f"**{result['actor_ratio_one_process']:.2f}×**, learner steps "
        f"**{result['learner_ratio_one_process']:.2f}×**; over one process with the replay "
        f"apart: actor steps **{result['actor_ratio_replay_apart']:.2f}×**, learner steps "
        f"**{result['learner_ratio_replay_apart']:.2f}×**.",
        "",
        "Rerun: `" + result["command"] + "`",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--out", default="distribution")
    args = parser.parse_args()
    os.chdir(ROOT)
    log_dir = Path(tempfile.mkdtemp(prefix="topo-distribution-bench-"))
    rounds: list[dict[str, Any]] = []
    sides = ["topo", "one_process", "replay_apart"]
    for i in range(args.rounds):
        got = {}
        for side in sides[i % 3 :] + sides[: i % 3]:  # each side goes first in turn
            if side == "topo":
                got[side] = topo_rates(args.actors, args.warmup, args.seconds, log_dir)
            else:
                apart = side == "replay_apart"
                got[side] = one_process_rates(args.actors, args.warmup, args.seconds, apart)
        row: dict[str, Any] = {**got}
        for base in ("one_process", "replay_apart"):
            for what in ("actor", "learner"):
                key = f"{what}_steps_per_s"
                row[f"{what}_ratio_{base}"] = got["topo"][key] / got[base][key]
        rounds.append(row)
        print(json.dumps(row), flush=True)
    result = {
        "command": " ".join([".venv/bin/python", "bench/distribution_bench.py", *sys.argv[1:]]),
        "time": time.strftime("%Y-%m-%d %H:%M %Z"),
        "actors": args.actors,
        "warmup": args.warmup,
        "seconds": args.seconds,
        "rounds": rounds,
        **{
            f"{what}_ratio_{base}": statistics.median(r[f"{what}_ratio_{base}"] for r in rounds)
            for base in ("one_process", "replay_apart")
            for what in ("actor", "learner")
        },
    }
    out = ROOT / "bench" / "results"
    (out / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{args.out}.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
