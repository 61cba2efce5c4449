"""A process in a private network namespace serves on its loopback, and nothing outside
reaches the port: as root (a network namespace) and as another user (with a user
namespace, where the kernel allows it)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from topo.runtime.isolation import isolation_unavailable

ROOT = Path(__file__).resolve().parents[2]
SERVER = textwrap.dedent("""
    import os, socket
    from topo.runtime.isolation import isolate
    uid = os.getuid()
    why = isolate()
    assert why is None, why
    server = socket.create_server(("0.0.0.0", 0))
    port = server.getsockname()[1]
    inside = socket.create_connection(("127.0.0.1", port), timeout=5)  # lo works
    inside.close(); server.accept()[0].close()
    print(port, os.getuid() == uid, flush=True)
    server.settimeout(3.0)
    try:
        server.accept()
        print("reached")
    except socket.timeout:
        print("alone")
""")


def _serve_isolated(prefix: list[str]) -> tuple[int, str, str]:
    """Start the isolated server; try to reach its port from here; what it saw."""
    proc = subprocess.Popen(
        [*prefix, "-c", SERVER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().split()
        assert len(first) == 2, proc.communicate(timeout=30)
        port, same_uid = first
        outside = socket.socket()
        outside.settimeout(2)
        code = outside.connect_ex(("127.0.0.1", int(port)))  # refused: nobody listens here
        outside.close()
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert same_uid == "True"
    return code, out.strip(), err


@pytest.mark.slow
def test_as_root_the_port_is_reachable_only_inside() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    assert isolation_unavailable() is None
    _, seen, err = _serve_isolated([sys.executable])
    assert seen == "alone", err


@pytest.mark.slow
def test_as_another_user_the_port_is_reachable_only_inside() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root (to become another user) and setpriv")
    site = sysconfig.get_paths()["purelib"]
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env"]
    prefix += [f"PYTHONPATH={ROOT}{os.pathsep}{site}", "HOME=/tmp"]
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in dict.fromkeys(
        p for p in (shutil.which(name, path=d) for d in ("/usr/local/bin", "/usr/bin")) if p
    ):
        probe = subprocess.run(
            [
                *prefix,
                python,
                "-c",
                "from topo.runtime.isolation import isolation_unavailable;"
                "print(isolation_unavailable())",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if probe.returncode == 0:
            break
    else:
        pytest.skip(f"uid 65534 cannot run a system {name} with topo's packages")
    if probe.stdout.strip() != "None":
        pytest.skip(f"no unprivileged user namespaces here: {probe.stdout.strip()}")
    _, seen, err = _serve_isolated([*prefix, python])
    assert seen == "alone", err
