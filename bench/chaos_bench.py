"""Chaos benchmark (procs or ssh backend): ``kill -9`` a random node every few seconds while a
client keeps calling every node, and count what the callers see.

20 courier nodes restart on failure (``max_restarts: 1000``, backoff 0.2 s .. 1 s). Client
threads in this process call random nodes without pause -- blocking calls and batches of
futures, each with a deadline -- while the bench SIGKILLs the process of a random node
every ``--interval`` seconds for ``--duration`` seconds. Reported: calls made and how many
succeeded, failures by exception type (``PeerUnavailable`` / ``DeadlineExceeded`` are
expected around a kill), the longest call, "hung" calls (not settled by their deadline
+ 1 s: there must be none), restarts and recovery times, and the orphans after the stop
(every pid the run ever started, checked gone).

With ``--kill-server S`` the bench also SIGKILLs the fork server every S seconds: every
node dies with it and comes back in a new fork server (reported: those kills and the
time until every node is ready again).

With ``--backend ssh --hosts FILE`` the nodes run on the inventory's hosts, and
``--kill-agent S`` SIGKILLs the agent of a random host every S seconds (by the pid the
backend got in its hello, checked to be an agent's; the SSH test hosts share this
machine's process table): its nodes die with it and come back under a new agent on that
host. Processes left after the stop are then also counted inside the hosts (``ip netns
pids``, sshd aside).

Run:  ``.venv/bin/python bench/chaos_bench.py [--quick] [--duration 60] [--interval 2]
[--kill-server 10] [--backend ssh --hosts examples/hosts/testhosts.yaml --kill-agent 10]``.
Writes bench/results/chaos.json and chaos.md (with ``--kill-server``:
chaos_forkserver.*; with ``--kill-agent``: chaos_ssh_agent.*; ssh otherwise: chaos_ssh.*).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
for _p in (str(ROOT), str(HERE)):  # the fork server imports this module for Worker
    if _p not in sys.path:
        sys.path.insert(0, _p)

RESTART = "{policy: on-failure, max_restarts: 1000, backoff: {initial_s: 0.2, max_s: 1}}"
HUNG_SLACK_S = 1.0  # a call not settled by its deadline + this is "hung"


class Worker:
    """A courier node: a cheap call that says which process answered."""

    def ping(self, x: int) -> tuple[int, int]:
        return x + 1, os.getpid()


class Tally:
    """Outcomes of the client's calls (thread-safe)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.lock = threading.Lock()
        self.ok = 0
        self.failures: Counter[str] = Counter()
        self.durations: list[float] = []
        self.hung = 0
        self.in_flight: dict[int, float] = {}  # client thread -> start of its blocking call

    def add(self, took: float, error: BaseException | None) -> None:
        with self.lock:
            self.durations.append(took)
            if took > self.deadline + HUNG_SLACK_S:
                self.hung += 1
            if error is None:
                self.ok += 1
            else:
                self.failures[type(error).__name__] += 1


def _program(nodes: int, target: str = "chaos_bench:Worker") -> Any:
    from topo.api import load

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chaos.yaml"
        path.write_text(
            f"name: chaos\nnodes:\n  worker:\n    target: '{target}'\n"
            f"    count: {nodes}\n    restart: {RESTART}\n"
        )
        return load(path).program


def _blocking_client(
    run: Any, ids: list[str], tally: Tally, stop: threading.Event, rng: random.Random
) -> None:
    handles = [run.handle(n, timeout=tally.deadline) for n in ids]
    me = threading.get_ident()
    i = 0
    while not stop.is_set():
        i += 1
        t0 = time.monotonic()
        tally.in_flight[me] = t0
        error: BaseException | None = None
        try:
            assert rng.choice(handles).ping(i)[0] == i + 1
        except Exception as exc:
            error = exc
        tally.in_flight.pop(me, None)
        tally.add(time.monotonic() - t0, error)


def _futures_client(
    run: Any,
    ids: list[str],
    tally: Tally,
    stop: threading.Event,
    rng: random.Random,
    batch: int = 4,
) -> None:
    handles = [run.handle(n, timeout=tally.deadline) for n in ids]
    i = 0
    while not stop.is_set():
        sent: list[tuple[float, int, Future[Any]]] = []
        for _ in range(batch):
            i += 1
            sent.append((time.monotonic(), i, rng.choice(handles).futures.ping(i)))
        for t0, x, fut in sent:
            error: BaseException | None = None
            left = t0 + tally.deadline + HUNG_SLACK_S + 5 - time.monotonic()
            try:
                assert fut.result(timeout=max(left, 0.01))[0] == x + 1
            except FutureTimeout as exc:  # not settled long after its deadline: hung
                error = exc
            except Exception as exc:
                error = exc
            tally.add(time.monotonic() - t0, error)


def _killer(
    run: Any,
    ids: list[str],
    duration: float,
    interval: float,
    rng: random.Random,
    killed: list[tuple[float, str, int]],
) -> None:
    """SIGKILL the process of a random running node every ``interval`` s for ``duration``."""
    start = time.monotonic()
    n = 0
    while True:
        n += 1
        wake = start + n * interval
        if wake > start + duration:
            time.sleep(max(0.0, start + duration - time.monotonic()))
            return
        time.sleep(max(0.0, wake - time.monotonic()))
        pids = run.launcher.pids()
        up = [n_ for n_ in ids if pids.get(n_)]
        if not up:
            continue
        node = rng.choice(up)
        try:
            os.kill(pids[node], signal.SIGKILL)
            killed.append((time.monotonic(), node, pids[node]))
        except ProcessLookupError:
            pass


def _server_killer(
    run: Any,
    duration: float,
    interval: float,
    stop: threading.Event,
    killed: list[tuple[float, int]],
) -> None:
    """SIGKILL the fork server every ``interval`` s (0: never) for ``duration``."""
    end = time.monotonic() + duration
    while interval > 0 and not stop.wait(interval) and time.monotonic() < end:
        for pid in run.launcher.backend.helper_pids():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append((time.monotonic(), pid))
            except ProcessLookupError:
                pass


def _is_agent(pid: int) -> bool:
    """Whether ``pid`` is an ssh agent (not a process that reused an agent's pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            line = f.read()
        return b"topo.backends.remote.stream" in line or line.startswith(b"topo: agent")
    except OSError:
        return False


def _agent_killer(
    run: Any,
    ids: list[str],
    duration: float,
    interval: float,
    stop: threading.Event,
    killed: list[tuple[float, int, list[str]]],
    seen: set[int],
    seed: int,
) -> None:
    """SIGKILL the agent of a random host every ``interval`` s (0: never) for
    ``duration`` (noting the nodes on that host); ``seen`` collects every agent pid met
    (for the orphan check)."""
    backend = run.launcher.backend
    rng = random.Random(seed + 1000)
    end = time.monotonic() + duration
    while interval > 0 and not stop.wait(interval) and time.monotonic() < end:
        agents = run.launcher.backend.agent_pids()
        seen.update(agents.values())
        up = sorted(h for h, pid in agents.items() if _is_agent(pid))
        if not up:
            continue
        host = rng.choice(up)
        pid = agents[host]
        on_it = [n for n in ids if backend.location(n) == host]
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append((time.monotonic(), pid, on_it))
        except ProcessLookupError:
            pass


def _host_strays(hosts: list[str], timeout: float) -> dict[str, list[int]] | None:
    """Processes left inside the hosts (network namespaces of the SSH test hosts) but
    their sshd, after at most ``timeout`` s; None if the hosts are not namespaces here."""
    import psutil

    def strays() -> dict[str, list[int]] | None:
        out: dict[str, list[int]] = {}
        for name in hosts:
            try:
                listing = subprocess.run(
                    ["ip", "netns", "pids", name], capture_output=True, text=True, check=True
                ).stdout
            except (OSError, subprocess.CalledProcessError):
                return None
            for pid in (int(p) for p in listing.split()):
                try:
                    proc = psutil.Process(pid)
                    if proc.name() == "sshd" or proc.status() == psutil.STATUS_ZOMBIE:
                        continue
                except psutil.NoSuchProcess:
                    continue
                out.setdefault(name, []).append(pid)
        return out

    end = time.monotonic() + timeout
    left = strays()
    while left and time.monotonic() < end:
        time.sleep(0.2)
        left = strays()
    return left


def chaos(
    nodes: int = 20,
    duration: float = 60,
    interval: float = 2,
    deadline: float = 3,
    clients: int = 2,
    log_dir: Path | None = None,
    seed: int = 0,
    server_interval: float = 0,
    hosts: Path | None = None,
    agent_interval: float = 0,
) -> dict[str, Any]:
    """Run the chaos scenario once; the results (see the module docstring). With
    ``hosts`` (an inventory) on the ssh backend, else on procs."""
    from topo.api import launch
    from topo.testing import wait_gone

    rng = random.Random(seed)
    # the hosts import the project from its root (the launcher's working directory)
    program = _program(nodes) if hosts is None else _program(nodes, "bench.chaos_bench:Worker")
    ids = [n.id for n in program.nodes]
    tmp = tempfile.TemporaryDirectory() if log_dir is None else None
    backend = "procs" if hosts is None else "ssh"
    run = launch(
        program,
        backend=backend,
        backend_options={} if hosts is None else {"hosts": hosts},
        log_dir=log_dir or Path(tmp.name),  # type: ignore[union-attr]
        ready_timeout=120,
    )
    ready_at: dict[str, list[float]] = {n: [] for n in ids}
    started: set[int] = set()

    def on_event(event: Any) -> None:
        if event.kind == "ready" and event.node in ready_at:
            ready_at[event.node].append(time.monotonic())
        elif event.kind == "started" and event.pid:
            started.add(event.pid)

    run.launcher.add_listener(on_event)
    tally = Tally(deadline)
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=target,
            args=(run, ids, tally, stop, random.Random(seed + k + 1)),
            name=f"chaos-client-{k}",
            daemon=True,
        )
        for k in range(clients)
        for target in (_blocking_client, _futures_client)
    ]
    killed: list[tuple[float, str, int]] = []
    servers_killed: list[tuple[float, int]] = []
    agents_killed: list[tuple[float, int, list[str]]] = []
    agents_seen: set[int] = set()
    server_killer = threading.Thread(
        target=_server_killer,
        args=(run, duration, server_interval, stop, servers_killed),
        name="chaos-server-killer",
        daemon=True,
    )
    agent_killer = threading.Thread(
        target=_agent_killer,
        args=(run, ids, duration, agent_interval, stop, agents_killed, agents_seen, seed),
        name="chaos-agent-killer",
        daemon=True,
    )
    try:
        t0 = time.monotonic()
        for t in threads:
            t.start()
        server_killer.start()
        agent_killer.start()
        _killer(run, ids, duration, interval, rng, killed)
        stop.set()
        server_killer.join()
        agent_killer.join()
        elapsed = time.monotonic() - t0
        for t in threads:
            t.join(deadline + HUNG_SLACK_S + 6)
        now = time.monotonic()
        tally.hung += sum(
            1 for s in list(tally.in_flight.values()) if now - s > deadline + HUNG_SLACK_S
        )
        recovered = run.wait_ready(30)
        answers = [run.handle(n, timeout=30).ping(0)[0] for n in ids]
        restarts = sum(s.restarts for s in run.status())
        ssh: Any = run.launcher.backend
        if hosts is not None:
            agents_seen.update(ssh.agent_pids().values())
            agent_restarts = sum(ssh.agent_restarts.values())
            hosts_lost = dict(ssh.lost)
        code = run.stop(timeout=60)
    finally:
        if run.exit_code is None:
            run.kill()
            run.wait(30)
    pids = run.pids() | {pid for _, pid in servers_killed}
    if hosts is not None:  # the hosts share this machine's process table
        pids |= started | agents_seen
    left = wait_gone(pids, 15)
    on_hosts = None if hosts is None else _host_strays(list(ssh.hosts), 15)
    if tmp is not None:
        tmp.cleanup()
    return {
        "config": {
            "nodes": nodes,
            "duration_s": duration,
            "interval_s": interval,
            "deadline_s": deadline,
            "clients": {"blocking": clients, "futures": clients},
            "restart": RESTART,
            "seed": seed,
            "kill_server_every_s": server_interval or None,
            "backend": backend,
            "hosts": None if hosts is None else str(hosts),
            "kill_agent_every_s": agent_interval or None,
        },
        "elapsed_s": round(elapsed, 1),
        **_outcome(tally, elapsed),
        "kills": len(killed),
        "restarts": restarts,
        "recovery_s": _recovery(killed, ready_at),
        "server_kills": len(servers_killed),
        "server_recovery_s": _server_recovery(servers_killed, ready_at),
        **(
            {}
            if hosts is None
            else {
                "agent_kills": len(agents_killed),
                "agent_restarts": agent_restarts,
                "hosts_lost": hosts_lost,
                "agent_recovery_s": _agent_recovery(agents_killed, ready_at),
                "left_on_hosts": on_hosts,
            }
        ),
        "all_nodes_answer_after": recovered and answers == [1] * len(ids),
        "exit_code": code,
        "pids_started": len(pids),
        "orphans": left,
    }


def _outcome(tally: Tally, elapsed: float) -> dict[str, Any]:
    """What the callers saw."""
    calls = tally.ok + sum(tally.failures.values())
    return {
        "calls": calls,
        "succeeded": tally.ok,
        "success_pct": round(100 * tally.ok / calls, 2) if calls else 0.0,
        "calls_per_s": round(calls / elapsed, 1) if elapsed else 0.0,
        "failures": dict(tally.failures.most_common()),
        "longest_call_s": round(max(tally.durations, default=0.0), 3),
        "median_call_ms": round(1000 * statistics.median(tally.durations), 2)
        if tally.durations
        else None,
        "hung": tally.hung,
    }


def _recovery(
    killed: list[tuple[float, str, int]], ready_at: dict[str, list[float]]
) -> dict[str, float | None]:
    """Seconds from each kill to its node's next ``ready`` event: median and max."""
    times = []
    for t_kill, node, _pid in killed:
        after = [t for t in ready_at[node] if t > t_kill]
        if after:
            times.append(min(after) - t_kill)
    return {
        "median": round(statistics.median(times), 2) if times else None,
        "max": round(max(times), 2) if times else None,
    }


def _server_recovery(
    killed: list[tuple[float, int]], ready_at: dict[str, list[float]]
) -> dict[str, float | None]:
    """Seconds from each kill of the fork server until every node was ready again."""
    times = []
    for t_kill, _pid in killed:
        after = [min((t for t in ready if t > t_kill), default=None) for ready in ready_at.values()]
        if after and None not in after:
            times.append(max(t for t in after if t is not None) - t_kill)
    return {
        "median": round(statistics.median(times), 2) if times else None,
        "max": round(max(times), 2) if times else None,
    }


def _agent_recovery(
    killed: list[tuple[float, int, list[str]]], ready_at: dict[str, list[float]]
) -> dict[str, float | None]:
    """Seconds from each kill of an agent until every node of its host was ready again."""
    times = []
    for t_kill, _pid, nodes in killed:
        after = [min((t for t in ready_at[n] if t > t_kill), default=None) for n in nodes]
        if after and None not in after:
            times.append(max(t for t in after if t is not None) - t_kill)
    return {
        "median": round(statistics.median(times), 2) if times else None,
        "max": round(max(times), 2) if times else None,
    }


def _markdown(res: dict[str, Any], argv: str) -> str:
    c = res["config"]
    fails = ", ".join(f"{k} {v}" for k, v in res["failures"].items()) or "none"
    rec = res["recovery_s"]
    every = c.get("kill_server_every_s")
    server = srec = ""
    if every:
        srec_ = res["server_recovery_s"]
        server = f" The fork server itself is killed every {every:g} s."
        srec = (
            f"| fork server kills | {res['server_kills']} |\n"
            f"| fork server kill → every node ready again | median {srec_['median']} s, "
            f"max {srec_['max']} s |\n"
        )
    if c.get("backend") == "ssh":
        server += f" On the ssh backend, hosts of `{c['hosts']}`."
        left = res["left_on_hosts"]
        srec += f"| processes left inside the hosts after the stop | {_count(left)} |\n"
    if c.get("kill_agent_every_s"):
        arec = res["agent_recovery_s"]
        server += f" The agent of a random host is killed every {c['kill_agent_every_s']:g} s."
        lost = ", ".join(f"{h}: {w}" for h, w in res["hosts_lost"].items()) or "none"
        srec = (
            f"| agent kills / new agents started | {res['agent_kills']} / "
            f"{res['agent_restarts']} |\n"
            f"| agent kill → every node of its host ready again | median {arec['median']} s, "
            f"max {arec['max']} s |\n"
            f"| hosts lost | {lost} |\n"
        ) + srec
    return f"""# Chaos benchmark ({c.get("backend", "procs")} backend)

`{argv}` — Python {platform.python_version()}, {os.cpu_count()} CPUs (shared, noisy).

{c["nodes"]} courier nodes with `restart: {c["restart"]}`; {c["clients"]["blocking"]} client
threads making blocking calls and {c["clients"]["futures"]} sending batches of 4 futures, to
random nodes, each call with a {c["deadline_s"]:g} s deadline; `kill -9` of a random node
process every {c["interval_s"]:g} s for {c["duration_s"]:g} s.{server}

| measure | value |
| --- | ---: |
| calls made | {res["calls"]} ({res["calls_per_s"]}/s) |
| succeeded | {res["succeeded"]} ({res["success_pct"]} %) |
| failures by type | {fails} |
| longest call | {res["longest_call_s"]} s (median {res["median_call_ms"]} ms) |
| hung calls (past deadline + 1 s) | {res["hung"]} |
| kills / restarts observed | {res["kills"]} / {res["restarts"]} |
| kill → node ready again | median {rec["median"]} s, max {rec["max"]} s |
{srec}| every node answers afterwards | {"yes" if res["all_nodes_answer_after"] else "NO"} |
| exit code of the stop | {res["exit_code"]} |
| processes started / left after the stop | {res["pids_started"]} / {len(res["orphans"])} |
"""


def _count(left: dict[str, list[int]] | None) -> str:
    """Processes left inside the hosts, for the table."""
    if left is None:
        return "not checked (the hosts are not network namespaces here)"
    return str(sum(len(pids) for pids in left.values()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of chaos")
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between kills")
    ap.add_argument("--deadline", type=float, default=3.0, help="deadline of each call")
    ap.add_argument(
        "--clients",
        type=int,
        default=2,
        help="blocking client threads (and as many futures threads)",
    )
    ap.add_argument("--quick", action="store_true", help="15 s of chaos")
    ap.add_argument(
        "--kill-server",
        type=float,
        default=0.0,
        metavar="S",
        help="also kill -9 the fork server every S seconds (0: never)",
    )
    ap.add_argument("--backend", choices=("procs", "ssh"), default="procs")
    ap.add_argument("--hosts", type=Path, metavar="FILE", help="the inventory (ssh backend)")
    ap.add_argument(
        "--kill-agent",
        type=float,
        default=0.0,
        metavar="S",
        help="ssh: also kill -9 the agent of a random host every S seconds (0: never)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    if (args.backend == "ssh") != (args.hosts is not None):
        ap.error("--backend ssh needs --hosts FILE, and --hosts is for --backend ssh")
    if args.kill_agent and args.backend != "ssh":
        ap.error("--kill-agent needs --backend ssh (only ssh has agents)")
    if args.kill_server and args.backend != "procs":
        ap.error("--kill-server needs --backend procs (the ssh agents run the fork servers)")
    duration = 15.0 if args.quick else args.duration
    res = chaos(
        args.nodes,
        duration,
        args.interval,
        args.deadline,
        args.clients,
        seed=args.seed,
        server_interval=args.kill_server,
        hosts=args.hosts,
        agent_interval=args.kill_agent,
    )
    res["load_avg_1min_after"] = round(os.getloadavg()[0], 1)
    argv = " ".join([".venv/bin/python bench/chaos_bench.py", *sys.argv[1:]])
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "chaos_forkserver" if args.kill_server else "chaos"
    if args.backend == "ssh":
        stem = "chaos_ssh_agent" if args.kill_agent else "chaos_ssh"
    (args.out / f"{stem}.json").write_text(json.dumps(res, indent=2) + "\n")
    (args.out / f"{stem}.md").write_text(_markdown(res, argv))
    print(_markdown(res, argv))
    ok = not res["hung"] and not res["orphans"] and res["all_nodes_answer_after"]
    ok = ok and not res.get("left_on_hosts")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
