"""Issue 9 §1: a crashed node's address cannot be taken over by another local user.

A node is killed; during its restart back-off an unprivileged process tries to listen
at its old address with a server that accepts anyone. No caller may send it the run's
secret or unpickle a byte of its replies, and callers must reach the restarted node.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topo.testing import wait_gone, wait_until

HERE = Path(__file__).resolve().parent
NOBODY = 65534
# The attacker needs a Python that user 'nobody' may execute (the test's own one may sit
# under a private home directory); it uses only the standard library.
SYSTEM_PYTHON = "/usr/bin/python3"


def _as_nobody() -> None:
    os.setgid(NOBODY)
    os.setgroups([])
    os.setuid(NOBODY)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as 'nobody'")
@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason=f"no {SYSTEM_PYTHON}")
def test_dead_node_address_cannot_be_taken_over(
    topo_launch: Callable, topology: Callable, tmp_path: Path
) -> None:
    path = topology("""
        name: takeover
        nodes:
          victim:
            target: "bk_nodes:Echo"
            restart: {policy: on-failure, max_restarts: 2, backoff: {initial_s: 4}}
    """)
    run = topo_launch(path, "procs", ready_timeout=60)
    registry = run.launcher.registry
    assert registry is not None
    victim = run.handle("victim", timeout=30)
    _, first_pid = victim.whoami()
    endpoint = registry.service.lookup("victim")
    assert endpoint is not None
    trap_dir = tmp_path / "trap"
    trap_dir.mkdir()
    trap_dir.chmod(0o777)
    trace = trap_dir / "unpickled"

    os.kill(first_pid, signal.SIGKILL)
    wait_until(
        lambda: registry.service.lookup("victim") is None,
        5,
        what="the dead node's address to be unlisted",
        every=0.01,
    )

    attacker = subprocess.Popen(
        [SYSTEM_PYTHON, str(HERE / "attacker.py"), endpoint, "3", str(trace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_nobody,
    )
    answer: dict[str, Any] = {}

    def caller() -> None:  # calls while the node is down: must wait for the real one
        try:
            answer["whoami"] = victim.whoami()
        except Exception as exc:  # reported below
            answer["error"] = exc

    threads = [threading.Thread(target=caller) for _ in range(2)]
    for t in threads:
        t.start()
    future = victim.futures.whoami()
    out, err = attacker.communicate(timeout=60)
    for t in threads:
        t.join(60)
    seen = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    assert seen and seen["uid"] == NOBODY, f"the attacker did not run as nobody: {out} {err}"
    assert seen["creds"] == [], f"a caller sent its credentials to the attacker: {seen}"
    assert seen["requests"] == 0, f"a caller sent requests to the attacker: {seen}"
    assert not trace.exists(), "a caller unpickled the attacker's reply"
    assert "error" not in answer, answer.get("error")
    new_node, new_pid = answer["whoami"]
    assert (new_node, future.result(30)[0]) == ("victim", "victim")
    assert new_pid != first_pid and future.result(30)[1] == new_pid
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)


def test_run_directory_is_private(topo_launch: Callable, topology: Callable) -> None:
    path = topology("""
        name: private
        nodes:
          echo: {target: "bk_nodes:Echo"}
    """)
    run = topo_launch(path, "procs", ready_timeout=60)
    assert stat.S_IMODE(run.run_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((run.run_dir / "logs").stat().st_mode) == 0o700
    for f in (run.run_dir / "logs").iterdir():
        assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, f
    endpoint = run.launcher.registry.info.endpoint  # type: ignore[union-attr]
    sock_dir = Path(endpoint.removeprefix("ipc://")).parent
    assert endpoint.startswith("ipc://") and stat.S_IMODE(sock_dir.stat().st_mode) == 0o700
    assert run.stop(timeout=60) == 0
    assert not sock_dir.exists(), "the run's socket directory was left behind"
