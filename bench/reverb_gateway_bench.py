"""Reverb through topo's protected path against Reverb's open port, same run, same tables.

The DQN example's actor/learner pattern (examples/agents/dqn_core.py): actors write
n-step CartPole transitions one item at a time with a ``writer(max_sequence_length=1)``
as fast as they can, a learner samples batches of 64 through the example's
``replay_dataset`` (a ``reverb.TrajectoryDataset``), all at once for ``--seconds``. One
trial per path, the paths interleaved, ``--trials`` times; medians and their ratio.

* hosts: the replay on test host topo-h1, the actors on topo-h2, the learner on topo-h3
  (``ip netns exec``; tests/backends/ssh/testhosts.py). Open: ``10.213.0.11:PORT``. Protected:
  each client process's entrance (a Unix socket of its own), CURVE to the replay host's
  gateway, relayed to the server in its own network namespace.
* local: everything on this host. Open: ``127.0.0.1:PORT``. Protected: the replay's
  Unix socket door, relayed to the server in its own network namespace.

The open server and the protected one are two servers built alike on the same host.
The test hosts are held for the run (``testhosts.shared``: brought up if none are, taken
down after by their last user; needs root). Writes bench/results/OUT.json and .md
(``--out``, default reverb_gateway). ``python bench/reverb_gateway_bench.py
[--trials 5 --seconds 8 --actors 2 --where both --out reverb_gateway]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
NODE = "replay"  # the reverb node whose keys the gateway and its peers use
# make_replay_tables's keywords (samples_per_insert=None: no limiter holds actors back)
TABLE_ARGS: dict[str, Any] = {
    "prioritized": True,
    "max_size": 100_000,
    "min_size_to_sample": 1000,
    "samples_per_insert": None,
}
HOSTS = {"replay": ("topo-h1", "10.213.0.11"), "actor": ("topo-h2", ""), "learner": ("topo-h3", "")}


def _say(**msg: Any) -> None:
    print(json.dumps(msg), flush=True)


def _read() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        raise SystemExit(0)
    return dict(json.loads(line))


# -- roles (processes started by the driver) ----------------------------------------
def serve(host: str) -> None:
    """Two servers alike: one open on ``host`` (Reverb's own port), one protected."""
    import reverb

    from examples.agents.dqn_core import make_replay_tables
    from topo.nodes.reverb_jail import GatewayKeys, Jail, JailSpec
    from topo.runtime.rights import Authority
    from topo.runtime.streams import listening_socket, tcp_endpoint
    from topo.runtime.transport import make_ipc_dir

    init = _read()
    authority = Authority("prog-bench", init["secret"])
    keys = GatewayKeys(
        "curve", "prog-bench/replay", authority.token(NODE), authority.server_secret(NODE), NODE
    )
    scratch = tempfile.mkdtemp(prefix="topo-bench-")
    door = os.path.join(make_ipc_dir(), "reverb")
    listener = listening_socket(host)
    gateway = tcp_endpoint(host, listener.getsockname()[1])
    jail = Jail(
        JailSpec(
            make_replay_tables,
            TABLE_ARGS,
            os.path.join(scratch, "p"),
            door,
            listener,
            keys,
        )
    )
    assert jail.isolated is None, jail.isolated
    with __import__("socket").socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    checkpointer = reverb.checkpointers.DefaultCheckpointer(os.path.join(scratch, "o"))
    tables = make_replay_tables(**TABLE_ARGS)
    server = reverb.Server(tables, port=port, checkpointer=checkpointer)
    _say(open=f"{host}:{port}", unix=f"unix:{door}", gateway=gateway)
    _read()  # until told to end
    jail.stop()
    server.stop()
    shutil.rmtree(scratch, ignore_errors=True)


def _secure(secret: str) -> Callable[[Any], None]:
    """How a peer holding the replay's token secures its connections to the gateway."""
    from topo.runtime.auth import secure_client
    from topo.runtime.rights import Authority, client_keypair

    authority = Authority("prog-bench", secret)
    keypair = client_keypair(authority.token(NODE))
    server_key = authority.server_public(NODE)

    def secure(sock: Any) -> None:
        secure_client(sock, "curve", "bench", b"", keypair, server_key)

    return secure


def _address(cmd: dict[str, Any], security: Any) -> str:
    if cmd["via"] != "gateway":
        return str(cmd["address"])
    from topo.runtime.entrance import shared_entrance

    return shared_entrance(security, "bench", cmd["address"]).address


def act(cmd: dict[str, Any], security: Any) -> dict[str, float]:
    """One actor: write transitions for ``seconds``; items written and the time."""
    import numpy as np
    import reverb

    from examples.agents.dqn_core import TABLE
    from examples.agents.envs import DEFAULT, spec_of

    size = spec_of(DEFAULT).observation_size  # the table's signature is made from it
    rng = np.random.default_rng(0)
    step = {
        "observation": rng.standard_normal(size).astype(np.float32),
        "action": np.int32(1),
        "reward": np.float32(1.0),
        "discount": np.float32(0.99),
        "next_observation": rng.standard_normal(size).astype(np.float32),
    }
    client = reverb.Client(_address(cmd, security))
    n, start = 0, time.monotonic()
    with client.writer(max_sequence_length=1) as writer:
        while time.monotonic() - start < cmd["seconds"]:
            writer.append(step)
            writer.create_item(TABLE, 1, 1.0)
            n += 1
    return {"count": n, "seconds": time.monotonic() - start}


def learn(cmd: dict[str, Any], security: Any) -> dict[str, float]:
    """The learner: sample batches of 64 for ``seconds`` (from its first batch on)."""
    from examples.agents.dqn_core import replay_dataset

    address = _address(cmd, security)
    end = time.monotonic() + cmd["seconds"] + 30
    iterator = replay_dataset(address, 64)
    n, start = 0, None
    while time.monotonic() < end:
        try:
            next(iterator)
        except StopIteration:  # the table is below its minimum size yet
            iterator = replay_dataset(address, 64)
            continue
        if start is None:
            start = time.monotonic()
            end = start + cmd["seconds"]
            continue
        n += 64
    return {"count": n, "seconds": time.monotonic() - (start or time.monotonic())}


def work(role: str) -> None:
    """A worker: import once, then one trial per command."""
    import examples.agents.dqn_core  # noqa: F401 - imported before the first trial

    security = _secure(_read()["secret"])
    _say(ready=True)
    while "via" in (cmd := _read()):  # until told to end
        _say(**(act if role == "actor" else learn)(cmd, security))


# -- the driver -----------------------------------------------------------------------
class Proc:
    """A role in a process of its own (in a test host's namespace, or here)."""

    def __init__(self, role: str, netns: str | None, secret: str, host: str = "") -> None:
        argv = [sys.executable, str(Path(__file__).resolve()), "--role", role, "--host", host]
        if netns:
            argv = ["ip", "netns", "exec", netns, *argv]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
        self.p = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT
        )
        self.send(secret=secret)

    def send(self, **msg: Any) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()

    def get(self) -> dict[str, Any]:
        assert self.p.stdout is not None
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError(f"a bench process ended (exit {self.p.wait()})")
            if line.startswith("{"):
                return dict(json.loads(line))

    def end(self) -> None:
        if self.p.poll() is None:
            try:
                self.send(quit=True)
                assert self.p.stdin is not None
                self.p.stdin.close()
                self.p.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()  # by pid: our own child
                self.p.wait(10)


def measure(where: str, trials: int, seconds: float, actors: int) -> dict[str, Any]:
    """Interleaved trials of the open and the protected path; their figures."""
    from topo.runtime.auth import new_secret

    secret = new_secret()
    remote = where == "hosts"
    host = HOSTS["replay"][1] if remote else "127.0.0.1"
    procs = [Proc("server", HOSTS["replay"][0] if remote else None, secret, host)]
    try:
        doors = procs[0].get()
        workers = [
            Proc("actor", HOSTS["actor"][0] if remote else None, secret) for _ in range(actors)
        ]
        workers.append(Proc("learner", HOSTS["learner"][0] if remote else None, secret))
        procs += workers
        for w in workers:
            w.get()
        paths = {
            "open": {"via": "open", "address": doors["open"]},
            "protected": {"via": "gateway", "address": doors["gateway"]}
            if remote
            else {"via": "unix", "address": doors["unix"]},
        }
        runs: dict[str, list[dict[str, float]]] = {p: [] for p in paths}
        for i in range(trials + 1):  # the first round warms up, uncounted
            order = list(paths) if i % 2 == 0 else list(reversed(paths))
            for name in order:
                for w in workers:
                    w.send(**paths[name], seconds=seconds)
                got = [w.get() for w in workers]
                inserts = sum(g["count"] / g["seconds"] for g in got[:-1])
                samples = got[-1]["count"] / max(got[-1]["seconds"], 1e-9)
                if i:
                    runs[name].append({"inserts_per_s": inserts, "samples_per_s": samples})
                print(f"{where} {name}: {inserts:9.0f} inserts/s {samples:9.0f} samples/s")
    finally:
        for p in procs:
            p.end()
    out: dict[str, Any] = {"runs": runs}
    for key in ("inserts_per_s", "samples_per_s"):
        med = {name: statistics.median(r[key] for r in runs[name]) for name in runs}
        out[key] = {**med, "ratio": med["protected"] / med["open"]}
    return out


def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        "# Reverb: topo's protected path against the open port",
        "",
        f"`python bench/reverb_gateway_bench.py --trials {args.trials} --seconds "
        f"{args.seconds} --actors {args.actors} --where {args.where}` — the DQN example's "
        f"pattern: {args.actors} actors writing transitions with `writer(1)`, one learner "
        "sampling batches of 64 (`TrajectoryDataset`), all at once; open and protected "
        f"trials interleaved, medians of {args.trials}.",
        "",
        "| where | path | inserts/s | samples/s |",
        "| --- | --- | ---: | ---: |",
    ]
    for where, r in results["where"].items():
        for name in ("open", "protected"):
            lines.append(
                f"| {where} | {name} | {r['inserts_per_s'][name]:.0f} | "
                f"{r['samples_per_s'][name]:.0f} |"
            )
        lines.append(
            f"| {where} | **ratio** | **{r['inserts_per_s']['ratio']:.2f}×** | "
            f"**{r['samples_per_s']['ratio']:.2f}×** |"
        )
    cpus = os.cpu_count()
    lines += ["", f"Load average (1 min) at the end: {results['load']:.1f} on {cpus} CPUs."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--role", default="driver")
    parser.add_argument("--host", default="")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--where", choices=["hosts", "local", "both"], default="both")
    parser.add_argument("--out", default="reverb_gateway", help="results file stem")
    args = parser.parse_args()
    if args.role == "server":
        return serve(args.host)
    if args.role != "driver":
        return work(args.role)
    wheres = ["local", "hosts"] if args.where == "both" else [args.where]
    results: dict[str, Any] = {"where": {}}
    with contextlib.ExitStack() as held:
        if "hosts" in wheres:
            held.enter_context(_test_hosts())
        for where in wheres:
            results["where"][where] = measure(where, args.trials, args.seconds, args.actors)
    results["load"] = os.getloadavg()[0]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(results, indent=2) + "\n")
    text = report(results, args)
    (RESULTS / f"{args.out}.md").write_text(text)
    print(text)


def _test_hosts() -> contextlib.AbstractContextManager[object]:
    """The test hosts HOSTS names, held while the bench uses them."""
    from tests.backends.ssh import testhosts

    reason = testhosts.unavailable()
    if reason:
        sys.exit(f"--where hosts needs the ssh test hosts: {reason}")
    return testhosts.shared(len(HOSTS))


if __name__ == "__main__":
    main()
