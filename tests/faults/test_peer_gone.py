"""A call in flight to a node whose process ends (killed, restarted) fails within seconds,
not at its deadline: the reply can never come, and a caller waiting on (an actor on its
learner, with a deadline of minutes) stalled for nothing."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable

import pytest

from topo.rundir.layout import log_path
from topo.testing import wait_for_text, wait_until

PROGRAM = """
    name: peer_gone
    nodes:
      napper:
        target: "fault_nodes:Napper"
        restart: {{policy: on-failure, max_restarts: 2, backoff: {{initial_s: {backoff}}}}}
      caller:
        target: "fault_nodes:LongCaller"
        args: {{peer: "@napper", futures: {futures}}}
        rpc: {{deadline_s: 600}}
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backoff", "futures"),
    [(0.1, False), (60, False), (60, True)],
    ids=["restarted", "down", "down-future"],
)
def test_a_call_to_a_killed_peer_fails_in_seconds_not_at_its_deadline(
    topo_launch: Callable, topology: Callable, backoff: float, futures: bool
) -> None:
    program = PROGRAM.format(backoff=backoff, futures=str(futures).lower())
    run = topo_launch(topology(program), "procs")
    napper = log_path(run.run_dir, "napper")
    wait_for_text(napper, "napping", 60)
    os.kill(run.launcher.pids()["napper"], signal.SIGKILL)
    said = wait_for_text(log_path(run.run_dir, "caller"), "the call failed after", 120)
    found = re.search(r"the call failed after ([\d.]+) s: PeerUnavailable: (.*)", said)
    assert found, said
    assert "its process ended or restarted before it answered nap()" in found.group(2)
    # two looks at the registry a second apart, on a busy machine: far from the 600 s
    assert float(found.group(1)) < 60, said
    if backoff < 1:  # it came back: the program goes on
        wait_until(lambda: run.launcher.state.nodes["napper"].restarts == 1, 60)
    assert run.stop(timeout=60) == 0
