"""Start deadlines: a node still starting after its group's ``ready_timeout_s`` fails;
nodes still running after the stop's grace have their stacks dumped before the kill.

Its stacks are kept as the failure (or dumped to its log), then its executable is
killed; when the backend never reports that attempt's exit (its process was already
gone with whatever was to report it), the exit is assumed after ``EXIT_REPORT_S``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from topo.ir import Program
from topo.supervisor.state import ExeStatus, RunState

LATE_DUMP_S = 3.0  # at most this long dumping the stacks of nodes that outlived the grace
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
            if st.state != "starting" or st.started is None or n not in program.node_index:
                continue
            limit = program.group_of(n).ready_timeout_s
            if now - st.started < limit:
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


def dump_late_stacks(exes: list[ExeStatus], limit_s: float = LATE_DUMP_S) -> list[str]:
    """Dump the stacks of executables still running after the stop's grace into their
    logs (where each node was stuck is what the user needs to fix it), all at once and
    for at most ``limit_s``; the nodes whose stacks were dumped."""
    dumped: list[str] = []

    def dump(exe: ExeStatus) -> None:
        runner = exe.runner
        if runner is None:
            return
        try:
            if runner.dump_stacks(exe.nodes[0]):
                dumped.append(exe.nodes[0])
        except Exception:  # a dump is a courtesy: the kill follows anyway
            pass

    threads = [threading.Thread(target=dump, args=(e,), daemon=True) for e in exes]
    for thread in threads:
        thread.start()
    end = time.monotonic() + limit_s
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    return sorted(dumped)
