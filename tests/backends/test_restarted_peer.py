"""A caller's futures reach a node that restarted in a new process, though a call it
made to the old one was still in flight when that process died: the calls held back
behind it (to go as one batch) found no connection, and the futures engine looked the
node up again (it went on sending into the old address until each call's deadline:
seen as a stop that waited 60 s on a snapshot's pause call to a restarted node)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from topo.testing import wait_gone, wait_until

HELD = """
name: held
nodes:
  holder:
    target: "bk_nodes:Holder"
    rpc: {threads: 1}
    restart: {policy: always, backoff: {initial_s: 0.1}}
"""


def test_futures_go_to_the_new_process_of_a_restarted_node(
    topo_launch: Callable, topology: Callable
) -> None:
    run = topo_launch(topology(HELD), "procs", ready_timeout=60)
    holder = run.handle("holder", timeout=30)
    old = holder.submit("pid").result(timeout=30)
    run.handle("holder", timeout=5).submit("hold")  # in flight when the process dies
    wait_until(lambda: "holding" in run.log("holder"), 30, what="the call held")
    os.kill(old, signal.SIGKILL)
    assert not wait_gone([old], 30)

    def new_pid() -> int | None:
        try:
            pid = int(run.handle("holder", timeout=2).pid())  # (a blocking call)
        except Exception:
            return None
        return pid if pid != old else None

    new = wait_until(new_pid, 60, what="the node restarted")
    # the same handle's futures engine, which still counts the held call in flight
    assert holder.submit("pid").result(timeout=10) == new
    assert run.stop(timeout=60) == 0
