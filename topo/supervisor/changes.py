"""What ``topo apply`` changes in a run's supervision state (``RunState``), on the
supervisor's thread: a new program's executables and nodes added, those it no longer has
marked leaving, executables asked to end their nodes, and those gone forgotten.

The ``Supervisor`` calls these and does the rest (starting, the registry, events).
"""

from __future__ import annotations

import time

from topo.ir import Program
from topo.supervisor.state import ExeStatus, RunState


def adopt(state: RunState, program: Program) -> list[str]:
    """``program`` is the run's program from now on: its new executables and nodes are
    added (pending), kept executables take their groups' restart policies, and those it
    no longer has go on until retired, never restarted. The new executables' ids."""
    added = []
    fresh = RunState.of(program)
    for exe_id, status in fresh.exes.items():
        kept = state.exes.get(exe_id)
        if kept is None:
            state.exes[exe_id] = status
            added.append(exe_id)
        else:
            kept.policy, kept.leaving = status.policy, False
    for node_id, node in fresh.nodes.items():
        state.nodes.setdefault(node_id, node)
    for exe_id, status in state.exes.items():
        if exe_id not in program.executable_index:
            status.leaving = True
            status.restart_at = None
    state.generation += 1
    return added


def retire(state: RunState, exe_ids: list[str], why: str, grace_s: float) -> list[ExeStatus]:
    """Mark these executables as ending (``why``), with the grace they get; the ones
    running (the others have nothing to end)."""
    asked = []
    for exe_id in exe_ids:
        exe = state.exes[exe_id]
        exe.restart_at = None
        if exe.runner is None:
            continue
        exe.retiring = why
        exe.retire_deadline = time.monotonic() + grace_s
        exe.state = "stopping"
        asked.append(exe)
    return asked


def retired(state: RunState, exe: ExeStatus) -> str:
    """An executable asked to end (or no longer in the program) ended: why it ended."""
    why = exe.retiring or "left the program"
    exe.retiring, exe.retire_deadline = "", None
    exe.state = "stopped"
    for n in exe.nodes:
        if state.nodes[n].state not in ("failed", "finished"):
            state.nodes[n].state = "stopped"
    return why


def drop(state: RunState, program: Program, exe_ids: list[str]) -> set[str]:
    """Forget executables (and their nodes) that left ``program`` and ended; the node
    ids forgotten."""
    gone: set[str] = set()
    for exe_id in exe_ids:
        exe = state.exes.get(exe_id)
        if exe is None or exe.runner is not None or exe_id in program.executable_index:
            continue
        del state.exes[exe_id]
        for node in exe.nodes:
            if node not in program.node_index:
                state.nodes.pop(node, None)
                gone.add(node)
    return gone
