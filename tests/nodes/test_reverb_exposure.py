"""On one host, the reverb node's server is not reachable by other users: its port is in a
network namespace of its own, its door a Unix socket in the run's 0700 directory. Where
no namespace can be made, the node and ``topo plan`` say what stays open."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

# Not imported here: every worker collects this module, few run it (TensorFlow: ~3 CPU-s).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("reverb") is None, reason="needs reverb")

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # reverb_nodes must import in the launcher and the fork server
    sys.path.insert(0, str(HERE))

from topo.testing import wait_gone  # noqa: E402

NOBODY = 65534
ATTACK = HERE / "reverb_attack.py"


def _topology(
    tmp_path: Path, replay: str = 'kind: reverb\n    tables: "reverb_nodes:make_tables"'
) -> Path:
    path = tmp_path / "rv.yaml"
    path.write_text(
        "name: rv\nnodes:\n  replay:\n    "
        + replay
        + '\n  user:\n    target: "reverb_nodes:User"\n    args: {replay: "@replay"}\n'
    )
    return path


def _as_nobody() -> list[str]:
    """A command prefix running Python with reverb as uid 65534 (a Python of this version
    that user can run, with this environment's packages), or skip."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    dirs = [*os.environ.get("PATH", "").split(os.pathsep), "/usr/local/bin", "/usr/bin"]
    pythons = dict.fromkeys(p for p in (shutil.which(name, path=d) for d in dirs) if p is not None)
    site = sysconfig.get_paths()["purelib"]
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "env"]
    prefix += [f"PYTHONPATH={site}", "HOME=/tmp"]
    why = f"no {name} on PATH"
    for python in pythons:
        probe = subprocess.run(
            [*prefix, python, "-c", "import reverb"], capture_output=True, timeout=300
        )
        if probe.returncode == 0:
            return [*prefix, python]
        why = f"{python}: {probe.stderr[-200:]!r}"
    pytest.skip(f"uid {NOBODY} cannot run Python with reverb here ({why})")


def _listening(pids: list[int]) -> set[str]:
    """``host:port`` of every TCP socket these processes listen on (this namespace)."""
    out = set()
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            host = conn.laddr.ip if conn.laddr.ip not in ("0.0.0.0", "::") else "127.0.0.1"
            out.add(f"[{host}]:{conn.laddr.port}" if ":" in host else f"{host}:{conn.laddr.port}")
    return out


def _inner_ports(pid: int) -> set[int]:
    """The TCP ports listened on inside the network namespace of ``pid``."""
    out = subprocess.run(
        ["nsenter", "-t", str(pid), "-n", "ss", "-ltnH"], capture_output=True, text=True
    ).stdout
    return {int(line.split()[3].rpartition(":")[2]) for line in out.splitlines() if line.strip()}


@pytest.mark.slow
def test_another_user_on_the_host_cannot_reach_the_replay(
    topo_launch: Callable, tmp_path: Path
) -> None:
    nobody = _as_nobody()
    run = topo_launch(_topology(tmp_path), "procs", ready_timeout=120)
    user = run.handle("user", timeout=60)
    assert user.insert([1, 2, 3]) == 3
    replay = run.handle("replay", timeout=60)
    door = replay.address()
    (jail,) = psutil.Process(run.launcher.pids()["replay"]).children()
    inner = _inner_ports(jail.pid)
    assert inner, "the Reverb server listens inside its namespace"
    run_pids = [*run.pids(), jail.pid]
    exposed = _listening(run_pids)
    assert exposed == set()  # on one host nothing of the run listens on TCP
    targets = [door, *sorted(exposed), *(f"127.0.0.1:{p}" for p in sorted(inner))]
    attack = subprocess.run(
        [*nobody, str(ATTACK), "uniform", *targets], capture_output=True, text=True, timeout=300
    )
    results = json.loads(attack.stdout.strip().splitlines()[-1])
    worked = {a: s for a, r in results.items() for s, v in r.items() if v == "ok"}
    assert not worked, f"the other user got through: {worked} ({results})"
    # The door itself: the socket cannot even be opened by that user.
    path = door[len("unix:") :]
    connect = f"import socket; socket.socket(socket.AF_UNIX).connect({path!r})"
    raw = subprocess.run([*nobody, "-c", connect], capture_output=True, text=True, timeout=60)
    assert raw.returncode != 0 and "PermissionError" in raw.stderr, raw.stderr
    # The run is unaffected: same items, nothing forged.
    assert user.size() == 3
    assert set(user.sample(20)) <= {1, 2, 3}
    assert run.stop(timeout=60) == 0
    assert not wait_gone([jail.pid], 15)


@pytest.mark.slow
def test_a_replay_that_cannot_be_isolated_warns_and_still_serves(
    topo_launch: Callable, tmp_path: Path
) -> None:
    replay = (
        'target: "reverb_nodes:UnisolatedReverb"\n    args: {tables: "reverb_nodes:make_tables"}'
    )
    run = topo_launch(_topology(tmp_path, replay), "procs", ready_timeout=120)
    assert run.handle("replay", timeout=60).doors()["isolated"] is False
    assert "WARNING: reverb node replay could not be isolated (namespaces are off" in run.log(
        "replay"
    )
    assert "is open to every host and local user" in run.log("replay")
    assert run.stop(timeout=60) == 0


def test_plan_warns_when_this_machine_cannot_isolate_a_replay(
    run_topo: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import topo.runtime.isolation as isolation

    path = tmp_path / "rv.yaml"
    path.write_text(
        textwrap.dedent("""
        name: rv
        nodes:
          replay: {kind: reverb, tables: "reverb_nodes:make_tables"}
        """)
    )
    monkeypatch.setattr(isolation, "isolation_unavailable", lambda: "no user namespaces")
    result = run_topo("plan", path)
    assert result.exit_code == 0, result.output
    assert "group 'replay': its Reverb server cannot be isolated on this machine" in result.output
    assert "(no user namespaces)" in result.output
    monkeypatch.setattr(isolation, "isolation_unavailable", lambda: None)
    assert "cannot be isolated" not in run_topo("plan", path).output
