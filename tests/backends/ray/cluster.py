"""Real Ray clusters for the ray backend's tests: ``ray start --block`` processes, each
in its own temporary directory, ended by pid (never ``ray stop``, which would end every
Ray on the machine).

A one-node cluster runs on this machine's address. A multi-node cluster has its head
on the test hosts' bridge (``10.213.0.1``) and one worker inside each test host (its
network, mount and UTS namespaces, entered with ``nsenter``): Ray sees separate nodes
with their own addresses, and each worker sees its host's private ``/tmp/topo/remote``.
Token authentication is off: the bridge is private to this machine, and topo's own RPC
is authenticated (CURVE) regardless.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from topo.testing import wait_gone, wait_until

RAY = Path(sys.executable).with_name("ray")
START_TIMEOUT_S = 120.0


def ray_missing() -> str | None:
    """Why these tests cannot run here, or None."""
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        return f"ray is not installed ({exc}); ./dev setup installs the ray extra"
    if not RAY.exists():
        return f"no ray command next to {sys.executable}"
    return None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (empty when it is gone)."""
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


@dataclass
class Cluster:
    """A Ray cluster these tests started: its GCS address and ``ray start`` processes."""

    address: str  # HOST:PORT of its GCS
    temp: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)  # node name -> process
    ips: dict[str, str] = field(default_factory=dict)  # node name -> its address

    @property
    def pid(self) -> int:
        """The head's ``ray start --block`` process."""
        return self.procs["head"].pid

    def start(self, name: str, ip: str, argv: list[str], prefix: list[str] | None = None) -> None:
        """Start node ``name`` (``ray start --block`` + ``argv``) and wait until it is up;
        once more if Ray gave up on its first start (on a busy machine a worker's first
        call to the head can time out: "Failed to get node info ... Deadline Exceeded")."""
        try:
            self._start(name, ip, argv, prefix)
        except RuntimeError:
            proc = self.procs.pop(name)
            for pid in [*descendants(proc.pid), proc.pid]:  # what it started, by pid
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            proc.wait(30)
            self._start(name, ip, argv, prefix, again=True)

    def _start(
        self,
        name: str,
        ip: str,
        argv: list[str],
        prefix: list[str] | None = None,
        again: bool = False,
    ) -> None:
        log = self.temp / f"{name}{'-again' if again else ''}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [*(prefix or []), str(RAY), "start", "--block", *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=dict(os.environ, RAY_AUTH_MODE="disabled"),
            )
        self.procs[name] = proc
        self.ips[name] = ip

        def started() -> bool:
            if proc.poll() is not None:  # it ended: it will not start
                raise RuntimeError(f"ray start of {name} failed:\n{log_end()}")
            return b"Ray runtime started" in log.read_bytes()

        def log_end() -> str:
            return log.read_text(errors="replace")[-3000:]

        try:
            wait_until(started, START_TIMEOUT_S, every=0.2)
        except AssertionError:
            raise RuntimeError(f"ray start of {name} failed:\n{log_end()}") from None

    def node_of(self, pid: int) -> str | None:
        """The name of the node whose ``ray start`` process ``pid`` descends from (a
        process forked by an agent runs below that node's raylet); None: no node's."""
        starts = {proc.pid: name for name, proc in self.procs.items()}
        try:
            process: psutil.Process | None = psutil.Process(pid)
            while process is not None:
                if process.pid in starts:
                    return starts[process.pid]
                process = process.parent()
        except psutil.NoSuchProcess:
            pass
        return None

    def stop(self) -> list[int]:
        """End every node (workers first) by pid; the pids still alive after that."""
        pids = [p for proc in self.procs.values() for p in [proc.pid, *descendants(proc.pid)]]
        for name in [*[n for n in self.procs if n != "head"], "head"]:
            proc = self.procs.get(name)
            if proc is None:
                continue
            proc.send_signal(signal.SIGTERM)  # `ray start --block` ends what it started
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        left = wait_gone(pids, 20)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.temp, ignore_errors=True)
        return left


def _node_args(temp: Path, cpus: int, resources: dict[str, float], gpus: int = 0) -> list[str]:
    return [
        f"--temp-dir={temp}",
        f"--num-cpus={cpus}",
        f"--num-gpus={gpus}",
        "--disable-usage-stats",
        "--object-store-memory=100000000",
        f"--resources={json.dumps(resources)}",
    ]


def one_node(resources: dict[str, float], cpus: int = 2, gpus: int = 0) -> Cluster:
    """A head on this machine's address (GPUs declared to Ray need not exist)."""
    import ray

    temp = Path(tempfile.mkdtemp(prefix="topo-ray-", dir="/tmp"))  # short: Ray's sockets
    ip = str(ray.util.get_node_ip_address())
    port = free_port()
    cluster = Cluster(f"{ip}:{port}", temp)
    try:
        args = ["--head", f"--port={port}", "--include-dashboard=false"]
        cluster.start("head", ip, args + _node_args(temp / "head", cpus, resources, gpus))
    except BaseException:
        cluster.stop()
        raise
    return cluster


def on_test_hosts(hosts: tuple[str, ...], sshd_pids: dict[str, int], bridge_ip: str) -> Cluster:
    """A head on ``bridge_ip`` (1 CPU, resource ``host_head``) and one worker per test
    host (1 CPU, resource ``host_h<i>`` for the i-th of ``hosts``, whichever test hosts
    they are), inside the namespaces of that host's sshd."""
    temp = Path(tempfile.mkdtemp(prefix="topo-rayc-", dir="/tmp"))
    port = free_port(bridge_ip)
    cluster = Cluster(f"{bridge_ip}:{port}", temp)
    try:
        head = ["--head", f"--port={port}", f"--node-ip-address={bridge_ip}"]
        head += ["--include-dashboard=false"]
        cluster.start("head", bridge_ip, head + _node_args(temp / "head", 1, {"host_head": 1}))
        for i, name in enumerate(hosts, 1):
            short = f"h{i}"
            ip = _address_in(name)
            argv = [f"--address={cluster.address}", f"--node-ip-address={ip}"]
            argv += _node_args(temp / short, 1, {f"host_{short}": 1})
            enter = ["nsenter", "-t", str(sshd_pids[name]), "-n", "-m", "-u"]
            cluster.start(short, ip, argv, prefix=enter)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def add_worker(
    cluster: Cluster, name: str, host: str, sshd_pid: int, resources: dict[str, float]
) -> None:
    """One more worker node (1 CPU, ``resources``) inside test host ``host`` (beside the
    one there already: its own raylet and temporary directory, the host's address)."""
    ip = _address_in(host)
    argv = [f"--address={cluster.address}", f"--node-ip-address={ip}"]
    argv += _node_args(cluster.temp / name, 1, resources)
    enter = ["nsenter", "-t", str(sshd_pid), "-n", "-m", "-u"]
    cluster.start(name, ip, argv, prefix=enter)


def end_node(cluster: Cluster, name: str, pids: list[int]) -> list[int]:
    """End what is left of node ``name`` (``pids``: its processes, listed while it ran)
    and forget it; the pids still alive after that."""
    proc = cluster.procs.pop(name)
    cluster.ips.pop(name, None)
    for pid in [proc.pid, *pids]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(10)
    return wait_gone([proc.pid, *pids], 20)


def _address_in(namespace: str) -> str:
    out = subprocess.run(
        ["ip", "-n", namespace, "-4", "-o", "addr", "show", "dev", "eth0"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()[3].split("/")[0]
