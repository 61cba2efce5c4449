"""Least privilege end to end: on procs and threads, a node reaches only the nodes its
arguments refer to and those whose handles it was passed in a call; the launcher's
handles reach every node; refusals come from the callee, before any unpickling."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from topo.runtime import PermissionDenied
from topo.testing import wait_gone

RIGHTS = """
    name: rights
    nodes:
      learner: {target: "rights_nodes:Learner"}
      actor:
        target: "rights_nodes:Actor"
        args: {learner: "@learner"}
        restart: {policy: on-failure, max_restarts: 2, backoff: {initial_s: 0.05}}
      broker:
        target: "rights_nodes:Broker"
        args: {learner: "@learner", rogue: "@rogue"}
      rogue:
        target: "rights_nodes:Rogue"
        restart: {policy: on-failure, max_restarts: 2, backoff: {initial_s: 0.05}}
"""
BACKENDS = ["procs", "threads"]


def _restart(run: object, node: str, handle: object) -> int:
    """Crash ``node`` and wait for its restart; the new pid."""
    _, old = handle.whoami()  # type: ignore[attr-defined]
    try:
        handle.crash()  # type: ignore[attr-defined]
    except Exception:
        pass  # the process died under the call
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            _, pid = handle.whoami()  # type: ignore[attr-defined]
            if pid != old:
                return int(pid)
        except Exception:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{node} did not restart")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_node_reaches_only_what_it_was_wired_or_handed(
    topo_launch: Callable, topology: Callable, backend: str, tmp_path: Path
) -> None:
    run = topo_launch(topology(RIGHTS), backend, ready_timeout=60)
    learner = run.handle("learner", timeout=30)
    actor = run.handle("actor", timeout=30)
    rogue = run.handle("rogue", timeout=30)
    # The launcher's handles reach every node.
    for node in ("learner", "actor", "broker", "rogue"):
        assert run.handle(node, timeout=30).whoami()[0] == node
    assert learner.ping() == "learner"
    # A wired edge works, blocking and with futures.
    assert actor.step() == "learner" and actor.step_futures() == "learner"
    # An unwired call is refused by the callee, promptly, naming both.
    with pytest.raises(PermissionDenied) as denied:
        rogue.reach("learner")
    assert (denied.value.caller, denied.value.callee) == ("rogue", "learner")
    assert "'learner' refused a call from 'rogue'" in str(denied.value)
    with pytest.raises(PermissionDenied, match="refused a call from 'rogue'"):
        rogue.reach("actor", True)
    text, took = rogue.reach_timed("learner")
    assert text.startswith("denied: ") and took < 5, (text, took)
    assert learner.restores() == 0, "a refused call ran"
    # The rogue holds no secret: only its own keys, no right to call anyone.
    holds = rogue.holds()
    assert holds == {"secret": "", "authority": False, "serves": ["rogue"], "calls": []}
    # It cannot take over another node's address, nor serve as it.
    assert "refused to register 'learner'" in rogue.hijack("learner")
    assert "may not serve node 'learner'" in rogue.serve_as("learner")
    assert learner.ping() == "learner"
    # A forged token is refused before a byte of the call is unpickled.
    trace = tmp_path / "unpickled"
    before = learner.refusals()
    assert rogue.forge("learner", "0" * 64, str(trace)).startswith("denied: ")
    assert not trace.exists(), "a forged call's payload was unpickled"
    assert learner.refusals() > before
    # A handle passed in a call carries its right.
    assert run.handle("broker", timeout=30).introduce()
    assert rogue.use_given() == "restored"
    assert learner.restores() == 1
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_restarts_keep_rights(topo_launch: Callable, topology: Callable, backend: str) -> None:
    run = topo_launch(topology(RIGHTS), backend, ready_timeout=60)
    actor = run.handle("actor", timeout=30)
    rogue = run.handle("rogue", timeout=30)
    assert actor.step() == "learner"
    if backend == "procs":
        _restart(run, "actor", actor)
    assert actor.step() == "learner" and actor.step_futures() == "learner"
    with pytest.raises(PermissionDenied):
        rogue.reach("learner")
    if backend == "procs":
        # Forked after every other executable: the fork server left it no other
        # executable's rights in the memory it inherited.
        _restart(run, "rogue", rogue)
        authority = run.launcher.registry.authority
        digests = {
            n: hashlib.sha256(authority.token(n).encode()).hexdigest()
            for n in ("learner", "actor", "broker")
        }
        found = rogue.memory_holds(sorted(digests.values()))
        assert not found, (
            f"the rogue's memory holds tokens of {[n for n, d in digests.items() if d in found]}"
        )
        own = hashlib.sha256(authority.token("rogue").encode()).hexdigest()
        assert rogue.memory_holds([own]) == [own]  # the scan does find what is there
        with pytest.raises(PermissionDenied):
            rogue.reach("learner")
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)
