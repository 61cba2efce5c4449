"""Benchmark of the ``ssh`` backend on the test hosts (3 SSH hosts on this machine).

* launch -> every node ready, for N trivial courier nodes spread over 3 hosts by the
  backend's balanced placement, timed from the ``topo.launch`` call (host preflight and
  connections included, as a user waits for them), with the launcher's own ready time
  (its backend's ``open`` -> every node ready) beside it; against the naive way, one
  SSH session per node (each its own agent: interpreter + fork server, forking one
  node), measured in the same run, interleaved;
* RPC round trip from this process to a node on a test host (tcp + CURVE across the
  bridge) against the same node on the ``procs`` backend (ipc + PLAIN, loopback),
  both up at once, blocking calls interleaved over rounds.

Needs the test hosts up (/work/shared/testhosts, ``topo-hosts.sh up 3``) and an
inventory of them (``examples/hosts/testhosts.yaml``). Run from the repository root
(the hosts import the node class from it):  ``.venv/bin/python bench/ssh_bench.py
--hosts HOSTS.yaml [--sizes 30 90] [--repeats 3]``. Writes bench/results/ssh.json and
bench/results/ssh.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGET = "bench.ssh_bench:Trivial"
NAIVE_LEASE_S = 60.0  # the hosts import it with the launcher's cwd on their path


class Trivial:
    """A trivial courier node (this module is kept light: every fork server imports it)."""

    def ping(self) -> int:
        return int(np.int64(1))

    def echo(self, x: Any) -> Any:
        return x


class LinkWatch(threading.Thread):
    """Notes when a test host's link is down: the ssh tests of other checkouts cut hosts
    off the bridge while they run, and a run that saw a cut is marked as such."""

    def __init__(self) -> None:
        super().__init__(name="link-watch", daemon=True)
        self.links = sorted(Path("/sys/class/net").glob("topo-v*"))
        self.down: list[tuple[float, str]] = []  # (monotonic time, link) while down

    def run(self) -> None:
        while True:
            for link in self.links:
                try:
                    up = (link / "operstate").read_text().strip() == "up"
                except OSError:
                    up = False
                if not up:
                    self.down.append((time.monotonic(), link.name))
            time.sleep(0.1)

    def cuts(self, since: float) -> list[str]:
        """The links seen down since ``since`` (a ``time.monotonic()``)."""
        return sorted({name for t, name in self.down if t >= since})


WATCH = LinkWatch()


def _program(name: str, group: str, count: int | None) -> Any:
    from topo.api import load

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        extra = "" if count is None else f"    count: {count}\n"
        path.write_text(f"name: {name}\nnodes:\n  {group}:\n    target: '{TARGET}'\n{extra}")
        return load(path).program


def session_per_node(hosts: str) -> Any:
    """The baseline backend: one SSH session (an agent with its own interpreter and fork
    server) per executable, where the ``ssh`` backend opens one per host. Defined in a
    function so that the node module above does not import the backend on the hosts."""
    from topo.backends.base import ExecutableRunner, JobContext, Sink
    from topo.backends.remote.fleet import Fleet
    from topo.backends.remote.records import Agent
    from topo.backends.remote.transport import run_init
    from topo.backends.ssh.agents import AGENT_MODULE, SshAgents
    from topo.backends.ssh.backend import SshBackend
    from topo.backends.ssh.rundirs import clear
    from topo.rundir.layout import safe_name

    class AgentPerNode(SshAgents):
        """An agent per executable: the fleet's hosts are ``HOST|EXE``."""

        def open_agent(self, agent: Agent, job: JobContext) -> Any:
            host = agent.host.split("|", 1)[0]
            spec, fleet = self.hosts[host], self.fleet
            channel = self.sessions.open_channel(
                host,
                self.prepared.command(spec, ["-m", AGENT_MODULE]),
                lambda msg: fleet.message(agent, msg),
                lambda why: fleet.agent_unreachable(agent, why),
                fleet.agent_log(agent.label),
                self.lease_s,
                on_died=lambda how: fleet.agent_ended(agent, how),
            )
            init = {**run_init(job), "lease_s": self.lease_s}
            run_dir = _naive_dir(spec.workdir, job.run_dir.name, agent.host)
            channel.send(t="init", address=spec.address, run_dir=run_dir, **init)
            return channel

    def _naive_dir(workdir: str, run: str, key: str) -> str:
        return f"{workdir.rstrip('/')}/runs/{run}/{safe_name(key)}"

    class SessionPerNode(SshBackend):
        def open(self, job: JobContext, sink: Sink) -> None:
            assert self.sessions is not None and self.prepared is not None, "check() first"
            agents = AgentPerNode(self.sessions, self.hosts, self.prepared, self.lease_s)
            self.fleet = Fleet(job, sink, agents)

        def start(self, exe: str, attempt: int) -> ExecutableRunner:
            assert self.placement is not None and self.fleet is not None
            host = self.placement.relocate(exe, set(self.hosts))
            assert host is not None
            key = f"{host}|{exe}"
            self.fleet.open([key])  # its own session, opened here as the naive way does
            runner = self.fleet.runner(exe, attempt)
            self.fleet.send([(runner, key)])
            return runner

        def _clear_run_dirs(self) -> None:
            assert self.fleet is not None
            run = self.fleet.job.run_dir.name
            dirs = {k: self.hosts[k.split("|", 1)[0]].workdir for k in self.fleet.greeted}
            clear(self.sessions, {k: _naive_dir(w, run, k) for k, w in dirs.items()})

    # Its agents start all at once and load the hosts far more: a longer lease keeps
    # an agent that is slow to say its first word from counting as a lost host.
    return SessionPerNode(hosts, lease_s=NAIVE_LEASE_S)


def bench_launch(program: Any, backend: Any, log_dir: Path) -> dict[str, Any]:
    """``topo.launch`` -> every node ready; then stop -> launcher done, node pids gone."""
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
    hosts = Counter(launcher.backend.location(e.id) for e in program.executables)
    pids = {n.pid for n in run.status() if n.pid}  # the hosts share this pid namespace
    t1 = time.perf_counter()
    assert run.stop(timeout=120) is not None, "did not stop"
    stop = time.perf_counter() - t1
    left = wait_gone(pids, 30)
    assert not left, f"left behind: {left}"
    return {
        "ready_s": ready,
        "preflight_s": launcher.state.started_at - wall0,  # launch() call -> backend.open
        "launcher_ready_s": launcher.state.ready_at - launcher.state.started_at,
        "stop_s": stop,
        "per_host": dict(sorted(hosts.items())),
    }


def launch_rows(
    hosts: str, sizes: list[int], repeats: int, retries: int, log_dir: Path
) -> list[dict[str, Any]]:
    """Both ways for every size, interleaved repeat by repeat; medians of the runs that
    reached ready (a failed run is recorded with the host links seen cut, and rerun)."""
    from topo.backends.ssh.backend import SshBackend

    rows = []
    for n in sizes:
        program = _program(f"sshbench{n}", "node", n)
        runs: dict[str, list[dict[str, Any]]] = {"topo": [], "naive": []}
        failed: dict[str, list[dict[str, Any]]] = {"topo": [], "naive": []}
        for _ in range(repeats):
            for way, make in (("topo", SshBackend), ("naive", session_per_node)):
                for _attempt in range(retries + 1):  # a failed run is recorded, then rerun
                    since = time.monotonic()
                    try:
                        runs[way].append(bench_launch(program, make(hosts), log_dir))
                        runs[way][-1]["links_cut"] = WATCH.cuts(since)
                        break
                    except Exception as exc:
                        failed[way].append({"error": repr(exc), "links_cut": WATCH.cuts(since)})
                        print(n, way, "FAILED", failed[way][-1], flush=True)
            print(n, {k: round(v[-1]["ready_s"], 2) for k, v in runs.items() if v}, flush=True)
        row: dict[str, Any] = {"nodes": n, "repeats": repeats}
        for way, samples in runs.items():
            for key in ("ready_s", "preflight_s", "launcher_ready_s", "stop_s"):
                row[f"{way}_{key}"] = statistics.median(s[key] for s in samples)
            row[f"{way}_samples"] = samples
            row[f"{way}_failed"] = failed[way]
        row["speedup"] = row["naive_ready_s"] / row["topo_ready_s"]
        row["load_avg_1m"] = os.getloadavg()[0]
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if "samples" not in k}), flush=True)
    return rows


def rpc_rows(hosts: str, calls: int, rounds: int, log_dir: Path) -> dict[str, Any]:
    """Blocking round trips to one node over ssh (tcp + CURVE) and procs (ipc + PLAIN)."""
    from topo.api import launch

    payloads = {"tiny": (1, calls), "1MiB": (np.ones(1 << 17), max(rounds, calls // 2))}
    program = _program("sshbench-rpc", "echo", None)
    runs = {}
    try:
        runs["ssh (tcp + CURVE, across the bridge)"] = launch(
            program, "ssh", backend_options={"hosts": hosts}, log_dir=log_dir, ready_timeout=120
        )
        runs["procs (ipc + PLAIN, loopback)"] = launch(
            program, "procs", log_dir=log_dir, ready_timeout=120
        )
        handles = {name: run.handle("echo", timeout=60) for name, run in runs.items()}
        times: dict[tuple[str, str], list[float]] = {}
        for name, h in handles.items():
            for label, (x, n) in payloads.items():
                for _ in range(max(3, n // 20)):  # warm up
                    h.echo(x)
                times[(name, label)] = []
        for _ in range(rounds):
            for name, h in handles.items():
                for label, (x, n) in payloads.items():
                    for _ in range(n // rounds):
                        t0 = time.perf_counter()
                        h.echo(x)
                        times[(name, label)].append(time.perf_counter() - t0)
        out: dict[str, Any] = {}
        for (name, label), t in times.items():
            t.sort()
            out.setdefault(name, {})[label] = {
                "calls": len(t),
                "median_us": statistics.median(t) * 1e6,
                "p90_us": t[int(len(t) * 0.9)] * 1e6,
            }
        for name, run in runs.items():
            info = run.launcher.registry.info  # type: ignore[union-attr]
            out[name]["mechanism"] = info.mechanism
            out[name]["host"] = run.launcher.backend.location("echo") or "this machine"
        return out
    finally:
        for run in runs.values():
            run.stop(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", required=True, help="inventory of the 3 test hosts")
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 90])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=4000, help="tiny calls per system")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--retries", type=int, default=3, help="reruns of a failed run")
    args = parser.parse_args()
    os.chdir(ROOT)  # the hosts get the launcher's cwd on their path
    log_dir = Path(tempfile.mkdtemp(prefix="topo-ssh-bench-"))
    load0 = os.getloadavg()[0]
    WATCH.start()
    rows = launch_rows(args.hosts, args.sizes, args.repeats, args.retries, log_dir)
    rpc: dict[str, Any] = {}
    rpc_failed: list[dict[str, Any]] = []
    for _attempt in range(args.retries + 1):
        since = time.monotonic()
        try:
            rpc = rpc_rows(args.hosts, args.calls, args.rounds, log_dir)
            break
        except Exception as exc:
            rpc_failed.append({"error": repr(exc), "links_cut": WATCH.cuts(since)})
            print("rpc FAILED", rpc_failed[-1], flush=True)
    else:
        raise SystemExit("the RPC part failed every time")
    result = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "load_avg_1m_start_end": [load0, os.getloadavg()[0]],
        },
        "launch": rows,
        "rpc": rpc,
        "rpc_failed": rpc_failed,
    }
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ssh.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "ssh.md").write_text(markdown(result, args))
    print(markdown(result, args))


def markdown(result: dict[str, Any], args: argparse.Namespace) -> str:
    """The results as bench/results/ssh.md."""
    m = result["machine"]
    lines = [
        "# ssh backend benchmark",
        "",
        f"`.venv/bin/python bench/ssh_bench.py --hosts HOSTS.yaml --sizes "
        f"{' '.join(map(str, args.sizes))} --repeats {args.repeats}` — 3 test hosts "
        "(network namespaces with their own sshd, on this machine: the same "
        f"{m['cpus']} CPUs, shared and noisy), Python {m['python']}. Median of "
        f"{args.repeats} interleaved repeats. Launch → all ready is timed from the "
        "`topo.launch` call (host preflight and SSH connections included); the "
        "launcher's own ready time is from its backend's open to every node ready.",
        "",
        "| nodes (per host) | topo: one session per host, launch → all ready "
        "| of it: preflight + connect | launcher ready | naive: one session per node "
        "| naive launcher ready | speed-up | stop (topo / naive) | failed runs (topo / naive) "
        "| load avg (1 min) after |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["launch"]:
        per_host = "/".join(str(v) for v in r["topo_samples"][0]["per_host"].values())
        lines.append(
            f"| {r['nodes']} ({per_host}) | {r['topo_ready_s']:.2f} s "
            f"| {r['topo_preflight_s']:.2f} s | {r['topo_launcher_ready_s']:.2f} s "
            f"| {r['naive_ready_s']:.2f} s | {r['naive_launcher_ready_s']:.2f} s "
            f"| {r['speedup']:.1f}× | {r['topo_stop_s']:.2f} s / {r['naive_stop_s']:.2f} s "
            f"| {len(r['topo_failed'])} / {len(r['naive_failed'])} | {r['load_avg_1m']:.1f} |"
        )
    lines += [
        "",
        "RPC round trip from this process to one node, blocking calls, both nodes up "
        f"at once, interleaved over {args.rounds} rounds:",
        "",
        "| node | payload | calls | median µs | p90 µs | ratio (median) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    rpc = result["rpc"]
    base = rpc["procs (ipc + PLAIN, loopback)"]
    for name, per in rpc.items():
        for label in ("tiny", "1MiB"):
            r = per[label]
            ratio = r["median_us"] / base[label]["median_us"]
            lines.append(
                f"| {name}, on {per['host']} | {label} | {r['calls']} | {r['median_us']:.0f} "
                f"| {r['p90_us']:.0f} | {ratio:.2f}× |"
            )
    failures = [
        (r["nodes"], way, f)
        for r in result["launch"]
        for way in ("topo", "naive")
        for f in r[f"{way}_failed"]
    ] + [("RPC", "", f) for f in result["rpc_failed"]]
    if failures:
        lines += ["", "Failed runs (each rerun; the medians are of the runs that got ready):", ""]
        for nodes, way, f in failures:
            cut = ", ".join(f["links_cut"]) or "none"
            lines.append(f"- {nodes} {way}: {f['error'][:200]} — host links seen cut: {cut}")
    lines += [
        "",
        f"Load average (1 min) at start / end of the run: "
        f"{m['load_avg_1m_start_end'][0]:.1f} / {m['load_avg_1m_start_end'][1]:.1f}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
