"""How a run stops: once begun (why, and the exit code it ends with), every node is asked
to stop (the registry's stop event), the grace period runs, then every executable still
running is killed (where each was is dumped to its logs first), and its exit is awaited
``KILL_WAIT_S`` more at most. The ``Supervisor`` drives it from its thread."""

from __future__ import annotations

import time

from topo.runtime import RegistryServer
from topo.supervisor.deadlines import dump_late_stacks
from topo.supervisor.reports import Emit
from topo.supervisor.state import ExeStatus, RunState

KILL_WAIT_S = 10.0  # after the kill: how long the exits are awaited before the run ends


class Stop:
    """The stop of one run (``begun`` at most once)."""

    def __init__(self, state: RunState, emit: Emit) -> None:
        self.state = state
        self.registry: RegistryServer | None = None  # the stop channel, once there is one
        self.begun = False
        self.code = 0  # the exit code: 0 clean, 1 a node failed, or the one asked for
        self.killed = False  # the executables still running were killed
        self._emit = emit
        self._grace_deadline: float | None = None
        self._kill_deadline: float | None = None

    def begin(
        self, reason: str, node: str | None = None, *, failed: bool = False, code: int = 0
    ) -> None:
        """Stop the run (``node``: the one whose report stopped it), unless it is stopping
        already: restarts waiting are dropped, every node is asked to stop, the grace
        period begins."""
        if self.begun:
            return
        self.begun = True
        state = self.state
        state.stop_reason = reason if node is None or node in reason else f"{reason} ({node})"
        self.code = 1 if failed else code
        for exe in state.exes.values():
            if exe.restart_at is not None:
                exe.restart_at = None
                exe.state = "stopped"
        if self.registry is not None:
            self.registry.request_stop(reason, node)
        self._grace_deadline = time.monotonic() + state.grace_s
        state.stopping_since = time.time()
        self._emit("stopping", node, message=state.stop_reason)

    def kill(self, running: list[ExeStatus]) -> None:
        """Kill these executables now (the grace is over, or a kill was asked for)."""
        self.killed = True
        self._grace_deadline = None
        if self._kill_deadline is None:
            self._kill_deadline = time.monotonic() + KILL_WAIT_S
        for exe in running:
            assert exe.runner is not None
            try:
                exe.runner.kill()
            except Exception as exc:
                self.state.warnings.append(f"could not kill {exe.id}: {exc!r}")
            self._emit("killed", exe=exe.id, pid=exe.runner.pid if exe.runner else None)

    def tick(self, now: float, running: list[ExeStatus]) -> None:
        """Past the grace period: say which executables were still running, and kill them."""
        if self._grace_deadline is None or now < self._grace_deadline:
            return
        self._grace_deadline = None
        if running:
            dumped = dump_late_stacks(running)
            where = f"; where they were is in the logs of {', '.join(dumped)}" if dumped else ""
            self.state.warnings.append(
                f"killed {len(running)} executable(s) still "
                f"running after the {self.state.grace_s:g}s grace period{where}"
            )
        self.kill(running)

    def given_up(self, now: float) -> bool:
        """Whether the killed executables' exits were awaited long enough."""
        return self._kill_deadline is not None and now >= self._kill_deadline
