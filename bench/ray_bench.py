"""Benchmark of the ``ray`` backend against ``ssh`` and ``procs``, in one run
(interleaved rounds, medians; the machine is shared and noisy, so the baselines are
measured beside it).

* launch -> every node ready, for N trivial courier nodes (a ``count:`` group), timed
  from the ``topo.launch`` call: ``procs`` (the baseline), ``ssh`` on the 3 test hosts
  (an agent per host), ``RayBackend(address=...)`` joining a four-node Ray cluster that
  is already up (its own start-up is timed once, apart; an agent per Ray node forks the
  nodes), and ``RayBackend()`` with no address (a local Ray started for the run: Ray's
  own start is in its figure); then stop -> ``launch``'s run ended, and -> every
  process of it gone; plain Ray actors (no topo, one Ray worker each) for context, up
  to ``--plain-max`` nodes;
* RPC round trip between two nodes, a caller timing N blocking calls (tiny and 1 MiB)
  to an echo node: on Ray the caller on node h1 and the echo on h2 (``host_labels``),
  so the calls cross the bridge over TCP + CURVE; on ``procs`` the same two nodes on
  loopback ipc; and plain Ray actor calls h1 -> h2 (``ray.get(echo.echo.remote(x))``)
  for context. All three up at once, interleaved over rounds.

The cluster (``tests/backends/ray/cluster.py``): a head on the test hosts' bridge and one worker
inside each of 3 test hosts (``tests/backends/ssh/testhosts.py``), 1 CPU each, started by this
bench and stopped by pid at its end; test hosts are brought up (and taken down after)
only if none are up. Needs root. Run from the repository root:
``.venv/bin/python bench/ray_bench.py [--sizes 100] [--repeats 3] [--calls 2000]
[--ways procs ssh ray local plain] [--no-rpc] [--out ray]`` (about 10 minutes on 2
cores; ``--sizes 1000 --ways procs ssh ray --no-rpc --out ray-1000`` about as long).
Every measurement runs in a fresh child process (``--child``): Ray aborts a process on
some fatal errors, and this one must live to stop the cluster. Writes
bench/results/OUT.json and bench/results/OUT.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    from tests.backends.ssh.testhosts import HostSet

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
NODES = "bench.ray_nodes"  # imported by the actors and the fork server: kept light
SIZES = {"tiny": 0, "1MiB": 1 << 20}
PROCS, RAY, LOCAL = "procs", "ray (cluster up)", "ray (local Ray per run)"
SSH = "ssh (3 test hosts)"
PLAIN = "plain Ray actors, no topo (cluster up)"
WAYS = {"procs": PROCS, "ssh": SSH, "ray": RAY, "local": LOCAL, "plain": PLAIN}
GONE_TIMEOUT_S = 120.0  # 50 Ray workers on 2 busy cores take a while to exit
RPC_TOPO_RAY = "topo on ray: h1 → h2 (tcp + CURVE)"
RPC_PROCS = "topo on procs (ipc, loopback)"
RPC_PLAIN = "plain Ray actor call h1 → h2"


def _program(name: str, body: str) -> Any:
    from topo.api import load

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.yaml"
        path.write_text(f"name: {name}\nnodes:\n{body}")
        return load(path).program


def _tree(pids: list[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            out |= {pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))}
        except psutil.NoSuchProcess:
            continue
    return out


def bench_launch(program: Any, backend: Any, log_dir: Path) -> dict[str, Any]:
    """``topo.launch`` -> every node ready; stop -> run ended -> its processes gone (the
    nodes' pids, wherever they run: the test hosts share this pid namespace; and what
    this (child) process started for the run: fork server, a local Ray)."""
    from topo.api import launch
    from topo.testing import wait_gone

    wall0, t0 = time.time(), time.perf_counter()
    run = launch(program, backend=backend, log_dir=log_dir)
    ok = run.wait_ready(300)
    ready = time.perf_counter() - t0
    launcher = run.launcher
    if not ok or launcher.state.ready_at is None:
        run.stop(timeout=120)
        raise RuntimeError(f"not ready: {run.failure or 'timed out'} (see {run.run_dir})")
    where = Counter(launcher.backend.location(e.id) or "local" for e in program.executables)
    pids = (_tree([os.getpid()]) - {os.getpid()}) | run.pids()
    pids |= {n.pid for n in run.status() if n.pid}
    t1 = time.perf_counter()
    assert run.stop(timeout=120) is not None, "did not stop"
    stop = time.perf_counter() - t1
    left = wait_gone(pids, GONE_TIMEOUT_S)
    assert not left, f"left behind: {left}"
    return {
        "ready_s": ready,
        "preflight_s": launcher.state.started_at - wall0,  # launch() -> backend.open
        "launcher_ready_s": launcher.state.ready_at - launcher.state.started_at,
        "stop_s": stop,
        "gone_s": time.perf_counter() - t1,
        "per_node": dict(sorted(where.items())),
        "processes": len(pids),
    }


def bench_plain(n: int, address: str) -> dict[str, Any]:
    """Ray's own part, for comparison: connect, ``n`` plain actors asked for what the
    backend asks (0.01 CPU, SPREAD), each answering once; then ``ray.kill`` -> gone."""
    import ray

    from bench.ray_nodes import RayEcho
    from topo.testing import wait_gone

    t0 = time.perf_counter()
    ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    try:
        connected = time.perf_counter() - t0
        cls: Any = ray.remote(RayEcho)
        opts = {"num_cpus": 0.001, "scheduling_strategy": "SPREAD"}
        actors = [cls.options(**opts).remote() for _ in range(n)]
        found = ray.get([a.pid_where.remote() for a in actors], timeout=300)
        ready = time.perf_counter() - t0
        t1 = time.perf_counter()
        for actor in actors:
            ray.kill(actor, no_restart=True)
        stop = time.perf_counter() - t1
    finally:
        ray.shutdown()
    left = wait_gone([pid for pid, _ in found], GONE_TIMEOUT_S)
    assert not left, f"left behind: {left}"
    return {
        "ready_s": ready,
        "preflight_s": connected,
        "launcher_ready_s": ready - connected,
        "stop_s": stop,
        "gone_s": time.perf_counter() - t1,
        "per_node": dict(sorted(Counter(ip for _, ip in found).items())),
        "processes": n,
    }


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement in this fresh process (``--child``): a launch of ``n`` nodes with
    backend ``way``, or the RPC part."""
    from topo.backends.ray.backend import RayBackend

    log_dir = Path(spec["log_dir"])
    if spec["part"] == "rpc":
        return rpc_rows(spec["address"], spec["ips"], spec["calls"], spec["rounds"], log_dir)
    n, way = spec["n"], spec["way"]
    if way == PLAIN:
        return bench_plain(n, spec["address"])
    body = f"  node:\n    target: '{NODES}:Trivial'\n    count: {n}\n"
    program = _program(f"raybench{n}", body)
    if way == SSH:
        from topo.backends.ssh.backend import SshBackend

        backend: Any = SshBackend(spec["inventory"])
    elif way == RAY:
        backend = RayBackend(address=spec["address"])
    else:
        backend = RayBackend() if way == LOCAL else "procs"
    return bench_launch(program, backend, log_dir)


def in_child(spec: dict[str, Any], cluster: Any) -> dict[str, Any]:
    """``child(spec)`` in a fresh interpreter (Ray's fatal errors abort the process they
    are in: never this one, which must stop the cluster). The child checks by pid that
    its run's processes are gone; here, that nothing it started is left below this one
    (what was below it before -- the test hosts' sshd when this bench brought them up --
    is not the measurement's)."""
    import subprocess

    log = Path(spec["log_dir"]) / f"child-{time.time_ns()}.log"
    argv = [sys.executable, __file__, "--child", json.dumps(spec)]
    before = _tree([os.getpid()])
    with open(log, "w") as err:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=err, text=True, timeout=900)
    others = _tree([p.pid for p in cluster.procs.values()]) | before
    stray = _tree([os.getpid()]) - others
    if stray:
        from topo.testing import wait_gone

        stray = set(wait_gone(stray, 30))
    assert not stray, f"a measurement left processes behind: {sorted(stray)}"
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT ") :]))
    tail = log.read_text(errors="replace").strip().splitlines()[-3:]
    raise RuntimeError(f"the measurement failed ({done.returncode}, {log}): {tail}")


def launch_rows(
    cluster: Any, args: argparse.Namespace, inventory: Path, log_dir: Path
) -> list[dict[str, Any]]:
    """The ways for every size, interleaved repeat by repeat, each run in a fresh
    process; medians of the runs that got ready (a failed run is recorded, then rerun)."""
    rows = []
    for n in args.sizes:
        ways = [WAYS[w] for w in args.ways if w != "plain" or n <= args.plain_max]
        runs: dict[str, list[dict[str, Any]]] = {way: [] for way in ways}
        failed: dict[str, list[str]] = {way: [] for way in ways}
        for _ in range(args.repeats):
            for way in ways:
                spec = {"part": "launch", "way": way, "n": n, "address": cluster.address}
                spec |= {"inventory": str(inventory), "log_dir": str(log_dir)}
                for _attempt in range(args.retries + 1):
                    try:
                        runs[way].append(in_child(spec, cluster))
                        break
                    except Exception as exc:
                        failed[way].append(repr(exc))
                        print(n, way, "FAILED", repr(exc)[:500], flush=True)
            print(n, {k: round(v[-1]["ready_s"], 2) for k, v in runs.items() if v}, flush=True)
        row: dict[str, Any] = {"nodes": n, "repeats": args.repeats, "ways": {}}
        base = {
            b: statistics.median(s["ready_s"] for s in runs[b]) if runs.get(b) else None
            for b in (PROCS, SSH)
        }
        for way, samples in runs.items():
            if not samples:
                raise SystemExit(f"{way} never got ready with {n} nodes: {failed[way]}")
            med = {
                k: statistics.median(s[k] for s in samples)
                for k in ("ready_s", "preflight_s", "launcher_ready_s", "stop_s", "gone_s")
            }
            for key, b in (("vs_procs", PROCS), ("vs_ssh", SSH)):
                med[key] = med["ready_s"] / base[b] if base[b] else None
            row["ways"][way] = {**med, "samples": samples, "failed": failed[way]}
        row["load_avg_1m"] = os.getloadavg()[0]
        rows.append(row)
        print(json.dumps({w: round(v["ready_s"], 2) for w, v in row["ways"].items()}), flush=True)
    return rows


def _plain_actors(ips: dict[str, str]) -> tuple[Any, Any]:
    """A plain Ray caller actor on h1 and echo actor on h2."""
    import ray

    from bench.ray_nodes import RayCaller, RayEcho

    small: dict[str, Any] = {"num_cpus": 0.01, "max_concurrency": 1}
    caller: Any = ray.remote(RayCaller).options(resources={"host_h1": 0.001}, **small).remote()
    echo: Any = ray.remote(RayEcho).options(resources={"host_h2": 0.001}, **small).remote()
    where = ray.get([caller.where.remote(), echo.where.remote()], timeout=120)
    assert where == [ips["h1"], ips["h2"]], where
    return caller, echo


def rpc_rows(
    address: str, ips: dict[str, str], calls: int, rounds: int, log_dir: Path
) -> dict[str, Any]:
    """Blocking round trips caller -> echo: topo on Ray (h1 -> h2), topo on procs, plain
    Ray actors (h1 -> h2), all up at once, interleaved round by round."""
    import ray

    from topo.api import launch
    from topo.backends.ray.backend import RayBackend

    body = (
        f"  echo: {{target: '{NODES}:Echo', resources: {{host_labels: [host_h2]}}}}\n"
        f"  caller:\n    target: '{NODES}:Caller'\n    args: {{echo: '@echo'}}\n"
        "    resources: {host_labels: [host_h1]}\n"
    )
    program = _program("raybench-rpc", body)
    counts = {"tiny": calls, "1MiB": max(rounds, calls // 4)}
    # the backend finds this connection and keeps it (it ends only what it started)
    ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    runs: dict[str, Any] = {}
    plain: tuple[Any, Any] | None = None
    try:
        runs[RPC_TOPO_RAY] = launch(
            program, RayBackend(address=address), log_dir=log_dir, ready_timeout=180
        )
        runs[RPC_PROCS] = launch(program, "procs", log_dir=log_dir, ready_timeout=120)
        backend = runs[RPC_TOPO_RAY].launcher.backend
        where = [backend.location("caller"), backend.location("echo")]
        assert where == [ips["h1"], ips["h2"]], where
        plain = _plain_actors(ips)
        caller, echo = plain
        measure: dict[str, Any] = {
            name: run.handle("caller", timeout=120).measure for name, run in runs.items()
        }
        measure[RPC_PLAIN] = lambda n, size: ray.get(caller.measure.remote(echo, n, size))
        times: dict[tuple[str, str], list[float]] = {}
        for name, fn in measure.items():
            for label, size in SIZES.items():
                fn(max(3, counts[label] // 20), size)  # warm up
                times[(name, label)] = []
        for _ in range(rounds):
            for name, fn in measure.items():
                for label, size in SIZES.items():
                    times[(name, label)] += fn(counts[label] // rounds, size)
        out: dict[str, Any] = {}
        for (name, label), t in times.items():
            t.sort()
            out.setdefault(name, {})[label] = {
                "calls": len(t),
                "median_us": statistics.median(t) * 1e6,
                "p90_us": t[int(len(t) * 0.9)] * 1e6,
            }
        return out
    finally:
        for run in runs.values():
            run.stop(timeout=60)
        for actor in plain or ():
            ray.kill(actor, no_restart=True)
        ray.shutdown()


def _hosts() -> AbstractContextManager[HostSet]:
    """Three test hosts for as long as the bench runs (``testhosts.shared``: hosts up
    already are reused, else brought up, and taken down by the last user to leave)."""
    from tests.backends.ssh import testhosts

    reason = testhosts.unavailable()
    if reason:
        raise SystemExit(f"ray_bench needs the test hosts: {reason}")
    return testhosts.shared(3)


def measure_all(args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    """Start the cluster, run both parts, stop the cluster by pid (always)."""
    from tests.backends.ray.cluster import on_test_hosts
    from tests.backends.ssh import testhosts

    with _hosts() as hosts:
        names = hosts.names[:3]
        pids = {name: hosts.sshd_pids(name)[0] for name in names}
        t0 = time.perf_counter()
        cluster = on_test_hosts(names, pids, f"{testhosts.NET}.1")
        cluster_start = time.perf_counter() - t0
        try:
            print(f"cluster up in {cluster_start:.1f} s: {cluster.ips}", flush=True)
            inventory = hosts.inventory(log_dir / "hosts.yaml")
            rows = launch_rows(cluster, args, inventory, log_dir)
            rpc = None
            if args.rpc:
                spec = {"part": "rpc", "address": cluster.address, "ips": cluster.ips}
                spec |= {"calls": args.calls, "rounds": args.rounds, "log_dir": str(log_dir)}
                rpc = in_child(spec, cluster)
            ips = dict(cluster.ips)
        finally:
            left = cluster.stop()
            print("cluster stopped; left behind:", left or "nothing", flush=True)
    return {"cluster_start_s": cluster_start, "cluster_ips": ips, "launch": rows, "rpc": rpc}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100])
    parser.add_argument("--ways", nargs="+", choices=sorted(WAYS), default=list(WAYS))
    parser.add_argument("--plain-max", type=int, default=100, help="plain actors up to")
    parser.add_argument("--no-rpc", dest="rpc", action="store_false", help="launch only")
    parser.add_argument("--out", default="ray", help="bench/results/OUT.json and .md")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000, help="tiny calls per system")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--retries", type=int, default=2, help="reruns of a failed launch")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one measurement (JSON spec)
    args = parser.parse_args()
    os.chdir(ROOT)  # the actors get the launcher's cwd on their path
    if args.child:
        print("RESULT " + json.dumps(child(json.loads(args.child))), flush=True)
        return
    from importlib.metadata import version

    from bench.ray_report import markdown

    log_dir = Path(tempfile.mkdtemp(prefix="topo-ray-bench-"))
    load0 = os.getloadavg()
    result: dict[str, Any] = {
        "command": " ".join([".venv/bin/python", "bench/ray_bench.py", *sys.argv[1:]]),
        "machine": {
            "python": platform.python_version(),
            "ray": version("ray"),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        },
    }
    result.update(measure_all(args, log_dir))
    result["machine"]["load_avg_start_end"] = [load0, os.getloadavg()]
    result["args"] = vars(args)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{args.out}.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
