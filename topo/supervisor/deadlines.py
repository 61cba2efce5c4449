"""Start deadlines: a node still starting after its group's ``ready_timeout_s`` fails.

Its stacks are kept as the failure (or dumped to its log), then its executable is
killed; when the backend never reports that attempt's exit (its process was already
gone with whatever was to report it), the exit is assumed after ``EXIT_REPORT_S``."""

from __future__ import annotations

import time
from collections.abc import Callable

from topo.ir import Program
from topo.supervisor.state import ExeStatus, RunState

EXIT_REPORT_S = 10.0  # a killed stuck attempt whose exit is not reported by then is gone

OnLost = Callable[[ExeStatus, str], None]  # (executable, why): its exit is taken as -9


def check_starting(program: Program, state: RunState, on_lost: OnLost) -> None:
    """Kill every executable with a node past its ready deadline; give up waiting for the
    exit of one killed more than ``EXIT_REPORT_S`` ago (``on_lost``)."""
    now = time.time()
    for exe in state.exes.values():
        if exe.runner is not None and exe.killed_at is not None:
            if time.monotonic() - exe.killed_at > EXIT_REPORT_S:
                on_lost(exe, f"its exit was not reported {EXIT_REPORT_S:g}s after it was killed")
            continue
        if exe.runner is None or exe.stuck:
            continue
        for n in exe.nodes:
            st = state.nodes[n]
            limit = program.group_of(n).ready_timeout_s
            if st.state != "starting" or st.started is None or now - st.started < limit:
                continue
            _kill_stuck(exe, n, limit, state)
            break


def _kill_stuck(exe: ExeStatus, node: str, limit: float, state: RunState) -> None:
    assert exe.runner is not None
    exe.stuck = (
        f"did not become ready within {limit:g}s (stuck in its "
        "constructor or while starting; see ready_timeout_s)"
    )
    stacks = exe.runner.dump_stacks(node)
    if exe.failure is None:
        exe.failure = (node, stacks)
    exe.killed_at = time.monotonic()
    try:
        exe.runner.kill()
    except Exception as exc:
        state.warnings.append(f"could not kill {exe.id}: {exc!r}")
