"""A one-node Ray cluster for the ray backend's tests: ``ray start --head --block`` in its
own temporary directory, on its own port, stopped by its pid at the end of the session
(never ``ray stop``, which would end every Ray on the machine)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from topo.testing import wait_gone

RAY = Path(sys.executable).with_name("ray")
LABEL = "topo_test_label"  # a custom resource of the test node (a host label)


@dataclass(frozen=True)
class Cluster:
    address: str  # HOST:PORT of its GCS
    pid: int  # the `ray start --block` process


def ray_missing() -> str | None:
    """Why these tests cannot run here, or None."""
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        return f"ray is not installed ({exc}); ./dev setup installs the ray extra"
    if not RAY.exists():
        return f"no ray command next to {sys.executable}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (empty when it is gone)."""
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Cluster]:
    """One Ray head with 2 CPUs and the custom resource ``LABEL``."""
    reason = ray_missing()
    if reason:
        pytest.skip(reason)
    temp = tempfile.mkdtemp(prefix="topo-ray-", dir="/tmp")  # short: Ray puts sockets there
    port = _free_port()
    out = open(Path(temp) / "ray-start.log", "wb")
    proc = subprocess.Popen(
        [
            str(RAY),
            "start",
            "--head",
            "--block",
            f"--port={port}",
            f"--temp-dir={temp}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
            "--object-store-memory=100000000",
            f'--resources={{"{LABEL}": 1}}',
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # Its drivers (the tests, in this process) join by explicit address, which never
        # turns on Ray's token auth; topo's own RPC is authenticated (CURVE) regardless.
        env=dict(os.environ, RAY_AUTH_MODE="disabled"),
    )
    out.close()
    log = Path(temp) / "ray-start.log"
    try:
        end = time.monotonic() + 90
        while b"Ray runtime started" not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > end:
                pytest.fail(f"ray start failed:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        address = f"{_node_ip()}:{port}"
        yield Cluster(address, proc.pid)
    finally:
        pids = descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)  # `ray start --block` ends what it started
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        left = wait_gone(pids, 20)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"the test Ray cluster left processes behind: {left}"


def _node_ip() -> str:
    import ray

    return str(ray.util.get_node_ip_address())
