"""Least privilege on procs where it is its own: a restarted node keeps its rights, and a
process forked after the others holds none of their tokens in its memory (who may call
whom on every backend: the conformance suite, tests/backends/test_conformance.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest

from topo.runtime import PermissionDenied
from topo.testing import wait_gone, wait_until

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


def _restart(run: object, node: str, handle: object) -> int:
    """Crash ``node`` and wait for its restart; the new pid."""
    _, old = handle.whoami()  # type: ignore[attr-defined]
    try:  # no reply comes: the process ends under the call (a short deadline, not 30 s)
        run.handle(node, timeout=2).crash()  # type: ignore[attr-defined]
    except Exception:
        pass

    def new_pid() -> int | None:
        _, pid = handle.whoami()  # type: ignore[attr-defined]
        return int(pid) if pid != old else None

    return wait_until(new_pid, 60, what=f"{node} to restart", errors=(Exception,))


@pytest.mark.slow
def test_restarts_keep_rights_and_a_fork_inherits_none_of_the_others(
    topo_launch: Callable, topology: Callable
) -> None:
    run = topo_launch(topology(RIGHTS), "procs", ready_timeout=60)
    actor = run.handle("actor", timeout=30)
    rogue = run.handle("rogue", timeout=30)
    assert actor.step() == "learner"
    _restart(run, "actor", actor)
    assert actor.step() == "learner" and actor.step_futures() == "learner"
    with pytest.raises(PermissionDenied):
        rogue.reach("learner")
    # Forked after every other executable: the fork server left it no other
    # executable's rights in the memory it inherited.
    _restart(run, "rogue", rogue)
    authority = run.launcher.registry.authority
    digests = {
        n: hashlib.sha256(authority.token(n).encode()).hexdigest()
        for n in ("learner", "actor", "broker")
    }
    own = hashlib.sha256(authority.token("rogue").encode()).hexdigest()
    found = rogue.memory_holds(sorted([own, *digests.values()]))  # one scan: it is slow
    others = [n for n, d in digests.items() if d in found]
    assert not others, f"the rogue's memory holds tokens of {others}"
    assert found == [own]  # the scan does find what is there
    with pytest.raises(PermissionDenied):
        rogue.reach("learner")
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)
