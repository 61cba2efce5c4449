"""Launch benchmark for the ``procs`` backend: start-up, stop, failure detection.

* from the command -> every node ready, for N trivial courier nodes, as a user feels it:
  a subprocess running ``topo run FILE -b procs`` (ready when it prints its "all N nodes
  up" line) and a fresh ``python`` calling ``topo.launch(FILE, backend="procs")`` (ready
  when ``launch`` returns with every node up); the clock starts before the process does;
* launch -> every node ready (the launcher's own clock, from a compiled program in this
  process), with topo's fork server against the naive way (one fresh interpreter per
  node, as Launchpad's local_mp) measured in the same run;
* stop (the program's stop request, as Ctrl-C makes it) -> every process gone;
* failure detection: ``kill -9`` of a node process -> the launcher's ``failed`` event.

The repeats are interleaved (one of each measurement per round) and medians reported,
with the load average before and after. Whether the interpreter finds cached bytecode
(``.pyc``) matters a lot here (compiling every imported module from source costs about a
second): the table says which state was measured, and ``--cold`` adds a ``topo run``
column with no bytecode cache at all (``PYTHONPYCACHEPREFIX`` pointed at an empty folder).

Run:  ``.venv/bin/python bench/launch_bench.py [--sizes 10 100 300] [--repeats 3] [--cold]``.
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

SETTLE_S = 10.0  # at most this long after the naive baseline, for the CPUs to go idle
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


def _yaml(n: int, folder: Path) -> Path:
    """A topology file of ``n`` trivial courier nodes (its target resolves from bench/)."""
    path = folder / f"bench{n}.yaml"
    path.write_text(
        f"name: bench{n}\nnodes:\n  node:\n    target: 'launch_bench:Trivial'\n    count: {n}\n"
    )
    return path


def _topo_command() -> list[str]:
    exe = Path(sys.executable).with_name("topo")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "topo"]


def _node_pids(run_dir: Path) -> set[int]:
    status = json.loads((run_dir / "status.json").read_text())
    return {n["pid"] for n in status["nodes"] if n["pid"]}


def bench_command(yaml: Path, run_dir: Path, env: dict[str, str] | None = None) -> float:
    """``topo run FILE -b procs`` in a subprocess: seconds from before the process starts
    to its "all N nodes up" line; then Ctrl-C, and every process it started is gone."""
    cmd = [*_topo_command(), "run", str(yaml), "-b", "procs", "--no-live", "--run-dir"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*cmd, str(run_dir)],
        cwd=HERE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    ready = None
    for line in proc.stdout:
        if " up in " in line:  # "all N nodes up in", "the node is up in"
            ready = time.perf_counter() - t0
            break
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    if ready is None or proc.returncode != 130:
        raise RuntimeError(f"topo run failed (exit {proc.returncode}): {err}")
    _gone(_node_pids(run_dir))
    return ready


API_CHILD = """
import sys, time
import topo
run = topo.launch(sys.argv[1], backend="procs", run_dir=sys.argv[2], ready_timeout=120)
print("READY", time.time(), flush=True)
sys.stdin.readline()
run.stop(timeout=60)
"""


def bench_api_file(yaml: Path, run_dir: Path) -> float:
    """A fresh ``python`` calling ``topo.launch(FILE, backend="procs")``: seconds from
    before the process starts to ``launch`` returning with every node up."""
    t0 = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-c", API_CHILD, str(yaml), str(run_dir)],
        cwd=HERE,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    proc.communicate("\n", timeout=120)
    if not line.startswith("READY") or proc.returncode != 0:
        raise RuntimeError(f"topo.launch failed (exit {proc.returncode}): {line!r}")
    _gone(_node_pids(run_dir))
    return float(line.split()[1]) - t0


def bytecode_state() -> dict[str, bool]:
    """Whether the interpreter finds cached bytecode for what the command imports."""
    import importlib.util

    import typer

    import topo.api

    def cached(module: Any) -> bool:
        return Path(importlib.util.cache_from_source(module.__file__)).exists()

    return {
        "site_packages": cached(typer),
        "topo": cached(topo.api),
        "dont_write_bytecode": bool(sys.flags.dont_write_bytecode),
    }


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

    def failed(e: Event) -> None:
        if e.kind == "failed":
            seen.setdefault(e.pid or 0, time.perf_counter())

    run.launcher.add_listener(failed)
    latencies = []
    try:
        for i in range(kills):
            node = f"node/{i % 10}"
            pid = run.launcher.state.nodes[node].pid
            assert pid is not None
            t0 = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            while pid not in seen:
                time.sleep(0.001)
            latencies.append(seen[pid] - t0)
            deadline = time.monotonic() + 30
            while run.launcher.state.nodes[node].state != "running" and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        run.stop(timeout=60)
    _ = Event
    return latencies


def _median(runs: list[dict[str, float]], key: str) -> float | None:
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def _settle() -> None:
    """Wait (up to ``SETTLE_S``) until no more processes are runnable than there are CPUs."""
    end = time.monotonic() + SETTLE_S
    while time.monotonic() < end:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
        if running <= (os.cpu_count() or 1):
            return
        time.sleep(0.2)


def _round(n: int, i: int, tmp: Path, cold_env: dict[str, str] | None) -> dict[str, float]:
    """One of each measurement for ``n`` nodes, one after the other: the naive baseline
    first, then a pause (``_settle``), so that its hundreds of interpreters are gone before topo's
    measurements start."""
    yaml = _yaml(n, tmp)
    naive = bench_naive(n)
    _settle()
    out = bench_topo(n, tmp / "runs")
    out["naive_s"] = naive
    out["command_s"] = bench_command(yaml, tmp / f"cmd-{n}-{i}")
    out["api_file_s"] = bench_api_file(yaml, tmp / f"api-{n}-{i}")
    if cold_env is not None:
        out["command_cold_s"] = bench_command(yaml, tmp / f"cold-{n}-{i}", cold_env)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 300])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument(
        "--cold", action="store_true", help="also topo run with no bytecode cache at all"
    )
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="topo-launch-bench-"))
    cold_env = None
    if args.cold:
        empty = tmp / "no-pycache"
        empty.mkdir()
        cold_env = {**os.environ, "PYTHONPYCACHEPREFIX": str(empty), "PYTHONDONTWRITEBYTECODE": "1"}
    bytecode = bytecode_state()
    rows = []
    for n in args.sizes:
        reps = args.repeats if n <= 100 else 1
        load_before = os.getloadavg()[0]
        runs = [_round(n, i, tmp, cold_env) for i in range(reps)]
        row: dict[str, Any] = {
            "nodes": n,
            "repeats": reps,
            "command_ready_s": _median(runs, "command_s"),
            "api_file_ready_s": _median(runs, "api_file_s"),
            "command_cold_ready_s": _median(runs, "command_cold_s"),
            "topo_ready_s": _median(runs, "ready_s"),
            "naive_ready_s": _median(runs, "naive_s"),
            "stop_s": _median(runs, "stop_s"),
            "samples": runs,
        }
        row["speedup"] = row["naive_ready_s"] / row["topo_ready_s"]
        row["load_avg_1m_before"] = load_before
        row["load_avg_1m"] = os.getloadavg()[0]
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "samples"}), flush=True)
    det = bench_detection(tmp / "runs", args.kills)
    result = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "bytecode_cached": bytecode,
        "launch": rows,
        "failure_detection_s": {"median": statistics.median(det), "max": max(det), "samples": det},
    }
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "launch.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "launch.md").write_text(_markdown(rows, det, bytecode, args.cold))
    print(_markdown(rows, det, bytecode, args.cold))


def _markdown(
    rows: list[dict[str, Any]], det: list[float], bytecode: dict[str, bool], cold: bool
) -> str:
    cached = "yes" if bytecode["site_packages"] and bytecode["topo"] else "no"
    lines = [
        "# Launch benchmark (procs backend)",
        "",
        f"`.venv/bin/python bench/launch_bench.py{' --cold' if cold else ''}` — Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs (shared, noisy). Medians of "
        f"interleaved repeats; bytecode cached (`.pyc` of site-packages and topo): {cached}.",
        "",
        'From the command: `topo run FILE -b procs` → its "all N nodes up" line, and a '
        'fresh `python` → `topo.launch(FILE, backend="procs")` returning with every node '
        "up; the clock starts before the process. Launch → all ready: the launcher's clock, "
        "a compiled program launched from the bench's process.",
        "",
        "| nodes | command: `topo run` → all ready | `topo.launch(file)` in a fresh python "
        + ("| `topo run`, no bytecode cache " if cold else "")
        + "| launch → all ready | naive: fresh interpreter per node | speed-up "
        "| stop → all gone | load avg (1 min) before → after |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: |" if cold else ""),
    ]
    for r in rows:
        cold_cell = f"{r['command_cold_ready_s']:.2f} s | " if cold else ""
        lines.append(
            f"| {r['nodes']} | {r['command_ready_s']:.2f} s | {r['api_file_ready_s']:.2f} s | "
            f"{cold_cell}{r['topo_ready_s']:.2f} s | {r['naive_ready_s']:.2f} s "
            f"| {r['speedup']:.1f}× | {r['stop_s']:.2f} s "
            f"| {r['load_avg_1m_before']:.1f} → {r['load_avg_1m']:.1f} |"
        )
    lines += [
        "",
        f"Failure detection (`kill -9` of a node → launcher's failed event), "
        f"{len(det)} kills: median {statistics.median(det) * 1000:.0f} ms, "
        f"max {max(det) * 1000:.0f} ms.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
