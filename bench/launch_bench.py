"""Launch benchmark for the ``procs`` backend: start-up, stop, failure detection.

* launch -> every node ready, for N trivial courier nodes, with topo's fork server
  against the naive way (one fresh interpreter per node, as Launchpad's local_mp)
  measured in the same run;
* stop (the program's stop request, as Ctrl-C makes it) -> every process gone;
* failure detection: ``kill -9`` of a node process -> the launcher's ``failed`` event.

Run:  ``.venv/bin/python bench/launch_bench.py [--sizes 10 100 300] [--repeats 3]``.
Writes bench/results/launch.json and bench/results/launch.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np  # node code typically imports numpy; the fork server pre-imports it

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE)]


class Trivial:
    """A trivial courier node."""

    def ping(self) -> int:
        return int(np.int64(1))


NAIVE_CHILD = """
import sys, json
import numpy, zmq
sys.path[:0] = {paths!r}
from topo.runtime import RegistryInfo, connect_program, run_node, set_process_program
from launch_bench import Trivial
info = RegistryInfo(**json.loads(sys.argv[1]))
program = connect_program(info)
set_process_program(program)
run_node(Trivial(), sys.argv[2], program=program)
"""


def _program(n: int, restart: str = "") -> Any:
    from topo.api import load

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(
            f"name: bench{n}\nnodes:\n  node:\n    target: 'launch_bench:Trivial'\n"
            f"    count: {n}\n{restart}"
        )
        return load(path).program


def _gone(pids: set[int], timeout: float = 30) -> float:
    from topo.testing import wait_gone

    start = time.perf_counter()
    left = wait_gone(pids, timeout)
    assert not left, f"left behind: {left}"
    return time.perf_counter() - start


def bench_topo(n: int, log_dir: Path) -> dict[str, float]:
    """Fork-server launch -> all ready, then stop -> all gone."""
    from topo.api import launch

    program = _program(n)
    t0 = time.perf_counter()
    run = launch(program, backend="procs", log_dir=log_dir)
    assert run.wait_ready(120), "not ready"
    ready = time.perf_counter() - t0
    pids = run.pids()
    t1 = time.perf_counter()
    run.launcher.request_stop("Ctrl-C", code=130)
    run.wait(120)
    _gone(pids)
    stop = time.perf_counter() - t1
    return {"ready_s": ready, "stop_s": stop}


def bench_naive(n: int) -> float:
    """One fresh interpreter per node, each importing what it needs and serving."""
    from topo.runtime import RegistryServer, new_program_id, new_secret

    registry = RegistryServer(new_program_id(), new_secret(), threads=8)
    code = NAIVE_CHILD.format(paths=[str(ROOT), str(HERE)])
    info = json.dumps(vars(registry.info))
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, "-c", code, info, f"node/{i}"], stdout=subprocess.DEVNULL)
        for i in range(n)
    ]
    try:
        while len(registry.service.entries()) < n:
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a naive child died")
            time.sleep(0.005)
        return time.perf_counter() - t0
    finally:
        registry.request_stop("bench done")
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        registry.close()


def bench_detection(log_dir: Path, kills: int) -> list[float]:
    """kill -9 of a node -> the launcher's 'failed' event, under on-failure restarts."""
    from topo.api import launch
    from topo.backends.base import Event

    program = _program(
        10,
        "    restart: {policy: on-failure, max_restarts: 100, "
        "backoff: {initial_s: 0.05, max_s: 0.05}}\n",
    )
    run = launch(program, backend="procs", log_dir=log_dir, ready_timeout=120)
    seen: dict[int, float] = {}
    run.launcher.add_listener(
        lambda e: seen.setdefault(e.pid or 0, time.perf_counter()) if e.kind == "failed" else None
    )
    latencies = []
    try:
        for i in range(kills):
            node = f"node/{i % 10}"
            pid = run.launcher.nodes[node].pid
            assert pid is not None
            t0 = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            while pid not in seen:
                time.sleep(0.001)
            latencies.append(seen[pid] - t0)
            deadline = time.monotonic() + 30
            while run.launcher.nodes[node].state != "running" and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        run.stop(timeout=60)
    _ = Event
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 300])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kills", type=int, default=10)
    args = parser.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="topo-launch-bench-"))
    rows = []
    for n in args.sizes:
        reps = args.repeats if n <= 100 else 1
        topo_runs = [bench_topo(n, log_dir) for _ in range(reps)]
        naive_runs = [bench_naive(n) for _ in range(reps)]
        row = {
            "nodes": n,
            "repeats": reps,
            "topo_ready_s": statistics.median(r["ready_s"] for r in topo_runs),
            "naive_ready_s": statistics.median(naive_runs),
            "stop_s": statistics.median(r["stop_s"] for r in topo_runs),
        }
        row["speedup"] = row["naive_ready_s"] / row["topo_ready_s"]
        row["load_avg_1m"] = os.getloadavg()[0]
        rows.append(row)
        print(json.dumps(row), flush=True)
    det = bench_detection(log_dir, args.kills)
    result = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "launch": rows,
        "failure_detection_s": {"median": statistics.median(det), "max": max(det), "samples": det},
    }
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "launch.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# Launch benchmark (procs backend)",
        "",
        f"`.venv/bin/python bench/launch_bench.py` — Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs (shared, noisy). Median of the repeats.",
        "",
        "| nodes | topo fork server: launch → all ready | naive: fresh interpreter per "
        "node | speed-up | stop → all gone | load avg (1 min) after |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['nodes']} | {r['topo_ready_s']:.2f} s | {r['naive_ready_s']:.2f} s "
            f"| {r['speedup']:.1f}× | {r['stop_s']:.2f} s | {r['load_avg_1m']:.0f} |"
        )
    lines += [
        "",
        f"Failure detection (`kill -9` of a node → launcher's failed event), "
        f"{len(det)} kills: median {statistics.median(det) * 1000:.0f} ms, "
        f"max {max(det) * 1000:.0f} ms.",
        "",
    ]
    (out / "launch.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
