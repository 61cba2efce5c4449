"""RPC benchmark: topo handles vs raw pyzmq vs grpcio (vs Ray, if installed).

Run as one script; every system is measured in the same run against a server
in its own process:  ``.venv/bin/python bench/rpc_bench.py [--quick]``.
Writes bench/results/rpc.json and bench/results/rpc.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]  # rpc_bench:Echo
WINDOW = 64
ROUNDS = 20  # blocking calls: rounds of every system in turn (pipelined: a quarter)
FLOOR = "raw pyzmq, ipc (floor)"
FLOOR_TCP = "raw pyzmq, tcp loopback"
BIG = np.random.default_rng(0).standard_normal(4 * 1024 * 1024 // 8)  # 4 MiB float64


# ---------------------------------------------------------------- servers (subprocess side)
def serve_raw(transport: str) -> None:
    """DEALER/ROUTER echo with pickle-5 out-of-band frames, zero-copy: the floor.

    One thread, ``recv_multipart(copy=False)``, ``send_multipart(copy=False)``; over
    ipc (as topo's nodes on one host) or tcp loopback (as across hosts)."""
    import tempfile

    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    if transport == "ipc":
        sock.bind(f"ipc://{tempfile.mkdtemp(prefix='rpc-raw-')}/echo")
    else:
        sock.bind("tcp://127.0.0.1:0")
    print(sock.getsockopt_string(zmq.LAST_ENDPOINT), flush=True)
    while True:
        frames = sock.recv_multipart(copy=False)
        obj = pickle.loads(frames[1].buffer, buffers=[f.buffer for f in frames[2:]])
        bufs: list[pickle.PickleBuffer] = []
        payload = pickle.dumps(obj, protocol=5, buffer_callback=bufs.append)
        sock.send_multipart([frames[0], payload, *bufs], copy=False)


class Echo:
    def echo(self, x: Any) -> Any:
        return x


def serve_topo(info_json: str, threads: int) -> None:
    from topo.runtime import RegistryInfo, connect_program, serve_node

    info = RegistryInfo(**json.loads(info_json))
    program = connect_program(info)
    server = serve_node(Echo(), "echo", "echo", program=program, threads=threads)
    print(server.endpoint, flush=True)
    program.stop_event.wait()


def serve_grpc() -> None:
    from concurrent import futures

    import grpc

    def echo(request: bytes, context: Any) -> bytes:
        return request

    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[
            ("grpc.max_receive_message_length", 64 << 20),
            ("grpc.max_send_message_length", 64 << 20),
        ],
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"127.0.0.1:{port}", flush=True)
    server.wait_for_termination()


# ---------------------------------------------------------------- clients
class RawClient:
    def __init__(self, endpoint: str) -> None:
        import zmq

        self.zmq = zmq
        self.sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.connect(endpoint)

    def _send(self, x: Any) -> None:
        bufs: list[pickle.PickleBuffer] = []
        payload = pickle.dumps(x, protocol=5, buffer_callback=bufs.append)
        self.sock.send_multipart([payload, *bufs], copy=False)

    def _recv(self) -> Any:
        frames = self.sock.recv_multipart(copy=False)
        return pickle.loads(frames[0].buffer, buffers=[f.buffer for f in frames[1:]])

    def call(self, x: Any) -> Any:
        self._send(x)
        return self._recv()

    def pipelined(self, x: Any, n: int) -> None:
        sent = done = 0
        while done < n:
            while sent < n and sent - done < WINDOW:
                self._send(x)
                sent += 1
            self._recv()
            done += 1

    def close(self) -> None:
        self.sock.close(linger=0)


class TopoClient:
    def __init__(self, program: Any) -> None:
        from topo.runtime import Handle

        self.h = Handle("echo", program=program)

    def call(self, x: Any) -> Any:
        return self.h.echo(x)

    def pipelined(self, x: Any, n: int) -> None:
        window: list[Any] = []
        for _ in range(n):
            window.append(self.h.futures.echo(x))
            if len(window) >= WINDOW:
                window.pop(0).result()
        for f in window:
            f.result()

    def close(self) -> None:
        pass


class LaunchedClient(TopoClient):
    """topo as users run it: ``topo.launch`` of a one-node topology on procs (its fork
    server, its registry), called through ``run.handle("echo")``."""

    def __init__(self, rpc: str, env: dict[str, str]) -> None:
        import tempfile

        import topo

        self.dir = tempfile.mkdtemp(prefix="topo-rpc-bench-")
        path = Path(self.dir) / "echo.yaml"
        extra = f"\n    rpc: {rpc}" if rpc else ""
        if env:
            extra += f"\n    resources: {{env: {json.dumps(env)}}}"
        path.write_text(f'name: echo\nnodes:\n  echo:\n    target: "rpc_bench:Echo"{extra}\n')
        self.run = topo.launch(path, backend="procs", log_dir=Path(self.dir) / "runs")
        assert self.run.wait_ready(60), "the echo node did not become ready"
        self.h = self.run.handle("echo")

    def close(self) -> None:
        import shutil

        self.run.stop(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


class RayClient:
    """A plain Ray actor call, ``ray.get(actor.echo.remote(x))``, on a local Ray."""

    def __init__(self) -> None:
        import ray

        ray.init(address="local", include_dashboard=False, log_to_driver=False)
        self.ray = ray
        # Any: ray's types give the handle's .echo as the plain method, without .remote
        self.actor: Any = ray.remote(Echo).remote()
        self.call(1)  # the actor up before the first timed call

    def call(self, x: Any) -> Any:
        return self.ray.get(self.actor.echo.remote(x))

    def pipelined(self, x: Any, n: int) -> None:
        window: list[Any] = []
        for _ in range(n):
            window.append(self.actor.echo.remote(x))
            if len(window) >= WINDOW:
                self.ray.get(window.pop(0))
        self.ray.get(window)

    def close(self) -> None:
        self.ray.shutdown()


class _NoProc:
    """Stands for a server process where the system owns its own (launch, Ray)."""

    def kill(self) -> None:
        pass

    def wait(self) -> None:
        pass


class GrpcClient:
    def __init__(self, target: str) -> None:
        import grpc

        self.channel = grpc.insecure_channel(
            target,
            options=[
                ("grpc.max_receive_message_length", 64 << 20),
                ("grpc.max_send_message_length", 64 << 20),
            ],
        )
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.stub = self.channel.unary_unary("/bench.Echo/Echo")

    @staticmethod
    def _enc(x: Any) -> bytes:
        return pickle.dumps(x, protocol=5)

    def call(self, x: Any) -> Any:
        return pickle.loads(self.stub(self._enc(x)))

    def pipelined(self, x: Any, n: int) -> None:
        window: list[Any] = []
        for _ in range(n):
            window.append(self.stub.future(self._enc(x)))
            if len(window) >= WINDOW:
                pickle.loads(window.pop(0).result())
        for f in window:
            pickle.loads(f.result())

    def close(self) -> None:
        self.channel.close()


# ---------------------------------------------------------------- measurement
def sync_times(client: Any, payload: Any, n: int) -> tuple[list[float], float]:
    """Round-trip times of ``n`` blocking calls, and their total wall time."""
    times = []
    t_all = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        client.call(payload)
        times.append(time.perf_counter() - t0)
    return times, time.perf_counter() - t_all


def summarize(times: list[float], total: float) -> dict[str, float]:
    times = sorted(times)
    return {
        "median_us": statistics.median(times) * 1e6,
        "p90_us": times[int(len(times) * 0.9)] * 1e6,
        "sync_calls_per_s": len(times) / total,
    }


def start(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, env=env, cwd=str(ROOT)
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line:
        proc.kill()
        raise RuntimeError(f"server {args} did not start")
    return proc, line


def run_all(
    systems: list[tuple[str, Any]], sizes: dict[str, tuple[Any, int, int]], rounds: int
) -> dict[str, Any]:
    """Measure every system with all servers up, interleaved in ``rounds`` so that
    machine noise hits every system alike; pipelined runs go last."""
    clients: dict[str, tuple[Any, Any]] = {}
    try:
        for name, make in systems:
            clients[name] = make()
        samples: dict[tuple[str, str], tuple[list[float], float]] = {}
        for name, (client, _) in clients.items():
            for label, (payload, n_sync, _) in sizes.items():
                sync_times(client, payload, max(3, n_sync // 20))  # warm up
                samples[(name, label)] = ([], 0.0)
        per_round: dict[tuple[str, str], list[float]] = {k: [] for k in samples}
        for _ in range(rounds):
            for name, (client, _) in clients.items():
                for label, (payload, n_sync, _) in sizes.items():
                    t, total = sync_times(client, payload, max(1, n_sync // rounds))
                    acc = samples[(name, label)]
                    samples[(name, label)] = (acc[0] + t, acc[1] + total)
                    per_round[(name, label)].append(statistics.median(t))
        results: dict[str, Any] = {name: {} for name in clients}
        for (name, label), (t, total) in samples.items():
            results[name][label] = summarize(t, total)
        for (name, label), medians in per_round.items():
            # Paired: each round's median against the floor's in the same round.
            floor = per_round[(FLOOR, label)] if (FLOOR, label) in per_round else medians
            results[name][label]["paired_ratio"] = statistics.median(
                m / f for m, f in zip(medians, floor, strict=True)
            )
        rates: dict[tuple[str, str], list[float]] = {k: [] for k in samples}
        for _ in range(max(5, rounds // 4)):  # pipelined runs, interleaved too
            for name, (client, _) in clients.items():
                for label, (payload, _, n_pipe) in sizes.items():
                    n = max(WINDOW, n_pipe // max(5, rounds // 4))
                    t0 = time.perf_counter()
                    client.pipelined(payload, n)
                    rates[(name, label)].append(n / (time.perf_counter() - t0))
        for (name, label), r in rates.items():
            results[name][label]["pipelined_calls_per_s"] = statistics.median(r)
            floor_rates = rates.get((FLOOR, label), r)
            results[name][label]["pipelined_paired_ratio"] = statistics.median(
                a / b for a, b in zip(r, floor_rates, strict=True)
            )
            print(name, label, {k: round(v, 1) for k, v in results[name][label].items()})
        return results
    finally:
        for client, proc in clients.values():
            client.close()
            proc.kill()
            proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", choices=["raw", "raw-tcp", "topo", "grpc"])
    ap.add_argument("--info", default="")
    ap.add_argument("--threads", type=int, default=8, help="tcp+CURVE server's rpc threads")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--only", default="", help="comma-separated substrings of systems to run")
    a = ap.parse_args()
    if a.serve in ("raw", "raw-tcp"):
        return serve_raw("tcp" if a.serve == "raw-tcp" else "ipc")
    if a.serve == "topo":
        return serve_topo(a.info, a.threads)
    if a.serve == "grpc":
        return serve_grpc()

    from dataclasses import asdict

    from topo.runtime import RegistryServer, connect_program, new_program_id, new_secret

    q = 4 if a.quick else 1
    sizes = {"tiny": (1, 4000 // q, 40000 // q), "4MiB": (BIG, 200 // q, 400 // q)}
    registries = []

    def topo_system(mechanism: str) -> Callable[[], tuple[Any, subprocess.Popen[str]]]:
        def make() -> tuple[Any, subprocess.Popen[str]]:
            reg = RegistryServer(
                new_program_id(),
                new_secret(),
                mechanism=mechanism,  # type: ignore[arg-type]
                default_deadline=60,
            )
            registries.append(reg)
            proc, _ = start(
                [
                    "--serve",
                    "topo",
                    "--info",
                    json.dumps(asdict(reg.info)),
                    "--threads",
                    str(a.threads),
                ]
            )
            return TopoClient(connect_program(reg.info)), proc

        return make

    def raw(kind: str) -> Callable[[], tuple[Any, subprocess.Popen[str]]]:
        def make() -> tuple[Any, subprocess.Popen[str]]:
            proc, ep = start(["--serve", kind])
            return RawClient(ep), proc

        return make

    def grpc_() -> tuple[Any, subprocess.Popen[str]]:
        proc, target = start(["--serve", "grpc"])
        return GrpcClient(target), proc

    def launched(rpc: str, env: dict[str, str] | None = None) -> Callable[[], tuple[Any, Any]]:
        return lambda: (LaunchedClient(rpc, env or {}), _NoProc())

    def ray_() -> tuple[Any, Any]:
        return RayClient(), _NoProc()

    systems = [
        (FLOOR, raw("raw")),
        (FLOOR_TCP, raw("raw-tcp")),
        ("topo.launch on procs, default rpc settings", launched("")),
        ("topo.launch on procs, rpc threads 1", launched("{threads: 1}")),
        # the same as the default, with the per-method call counters off (their cost)
        ("topo.launch on procs, call counters off", launched("", {"TOPO_RPC_STATS": "0"})),
        ("topo (tcp + CURVE, across hosts)", topo_system("curve")),
        ("grpcio generic unary", grpc_),
    ]
    try:
        import ray  # noqa: F401

        systems.append(("Ray actor call (local Ray)", ray_))
    except ImportError:
        pass
    wanted = [w for w in a.only.split(",") if w]
    chosen = [
        (n, m)
        for n, m in systems
        if n.startswith("raw") or not wanted or any(w in n for w in wanted)
    ]
    load0 = os.getloadavg()[0]
    results = run_all(chosen, sizes, rounds=ROUNDS)
    notes = []
    if not any(n.startswith("Ray") for n, _ in chosen):
        notes.append("Ray actor: skipped (ray is not installed, or not chosen with --only)")
    notes.append(
        f"machine load average (1 min) at start / end of the run: {load0:.1f} / "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    for reg in registries:
        reg.close()
    write(results, notes, a)


def _same_transport_floor(name: str) -> str:
    """The raw baseline over the same transport as ``name``."""
    return FLOOR_TCP if ("tcp" in name or "grpc" in name or "Ray" in name) else FLOOR


def write(results: dict[str, Any], notes: list[str], a: argparse.Namespace) -> None:
    base = results[FLOOR]
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "server_threads": a.threads,
        "window": WINDOW,
        "quick": a.quick,
        "notes": notes,
    }
    (out_dir / "rpc.json").write_text(
        json.dumps({"meta": meta, "results": results}, indent=2) + "\n"
    )
    lines = [
        "# RPC benchmark",
        "",
        f"Same run, every server in its own process, one host, {os.cpu_count()} CPUs "
        f"(shared, noisy); futures window {WINDOW}; all servers up at once, blocking calls "
        f"interleaved over {ROUNDS} rounds, then pipelined runs over {max(5, ROUNDS // 4)}. "
        "Ratios are paired: each round's median (or rate) against raw pyzmq over ipc (the "
        "floor) in the same round, and the median of those; the last column is the ratio "
        "of overall medians to raw pyzmq over the same transport.",
        "",
        "| system | payload | median µs | p90 µs | ratio (median) | pipelined calls/s "
        "| pipelined ratio | ratio to raw, same transport |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, per in results.items():
        same = results.get(_same_transport_floor(name), base)
        for label, r in per.items():
            ratio = r["paired_ratio"]
            pipe = r.get("pipelined_calls_per_s", 0)
            pipe_ratio = r["pipelined_paired_ratio"]
            same_ratio = r["median_us"] / same[label]["median_us"]
            lines.append(
                f"| {name} | {label} | {r['median_us']:.0f} | {r['p90_us']:.0f} | "
                f"{ratio:.2f}× | {pipe:,.0f} | {pipe_ratio:.2f}× | {same_ratio:.2f}× |"
            )
    lines += [
        "",
        "Goals (topo with default settings against the floor): tiny ≤ 1.3×, "
        "4 MiB ≤ 1.25×, pipelined tiny calls ≥ 0.8×.",
        "",
    ]
    lines += [f"- {n}" for n in notes]
    lines += ["", "Rerun: `.venv/bin/python bench/rpc_bench.py`", ""]
    (out_dir / "rpc.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
