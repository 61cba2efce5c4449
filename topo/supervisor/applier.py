"""``topo apply`` on a running program: carry out a :class:`LivePlan`, step by step.

The order keeps every caller served (a node looping over a whole-group handle never
calls a node that is not up):

1. the backend and the supervisor take the new program (new executables may register);
2. the new executables start; once their nodes are ready they join their groups;
3. executables whose definition changed restart ``max_unavailable`` at a time: their
   nodes leave their groups, end as at a stop (killed after the grace), start with the
   new definition, and join again once ready;
4. executables no longer in the program leave their groups, end, and are forgotten.

A node joins or leaves a group when the registry announces a new *membership
generation* and every running executable holding the group has fetched it (at most
``ACK_S``): then no holder still hands out the old members. Each step is written to
``<run_dir>/changes/<generation>.json`` as it happens (``topo.supervisor.change_record``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from topo.backends.base import Backend
from topo.ir import Program
from topo.ir.packing import as_applied
from topo.runtime import RegistryServer
from topo.supervisor.change_plan import ChangeAsk, LivePlan, group_table, holders, plan_change
from topo.supervisor.change_record import ChangeRecord
from topo.supervisor.preflight import preflight_update
from topo.supervisor.reactions import Supervisor

ACK_S = 5.0  # how long the holders of a group are given to take its new members
DRAIN_S = 0.5  # after that, before a leaving node is asked to end (calls under way finish)
EXIT_MARGIN_S = 15.0  # beyond the grace: how long an ending executable's exit is awaited
READY_MARGIN_S = 10.0  # beyond the group's ready_timeout_s: how long readiness is awaited
RUNNING = ("running", "finished")


class Snapshots(Protocol):
    """What a change asks of the run's snapshotter: no snapshot meanwhile, and the
    state of the nodes it restarts handed to their next start."""

    changing: str

    def hand_over(self, node_ids: list[str]) -> list[str]: ...

    def forget_handed(self, node_ids: list[str]) -> None: ...

    def start_fresh(self, node_ids: list[str]) -> None: ...


class ApplyInterrupted(Exception):
    """The run began to stop while a change was applied."""


class Applier:
    """Carries out live plans on one run, one at a time (``busy`` while one is)."""

    def __init__(
        self,
        supervisor: Supervisor,
        backend: Backend,
        registry: RegistryServer,
        run_dir: Path,
        adopt: Callable[[Program, dict[str, Any]], None],
        emit: Callable[..., None],
        phase: Callable[[], str],
        done: Callable[[], None],
    ) -> None:
        self._sup = supervisor
        self._backend = backend
        self._registry = registry
        self._run_dir = run_dir
        self._adopt = adopt  # the launcher takes the new program (record, snapshots, logs)
        self._emit = emit
        self._phase = phase
        self._done = done  # after a change: status.json written at once
        # Takes no snapshot while a change is applied; restarted nodes hand it their state.
        self.snapshots: Snapshots | None = None
        # Why a plan must be confirmed (plan, keep_state) -> reasons (topo.supervisor.hazards)
        self.hazards: Callable[[LivePlan, bool], list[str]] | None = None
        self._lock = threading.Lock()
        self.busy = False
        self._membership = 0  # the registry's membership generation
        self._programs: list[Program] = [supervisor.program]
        self._live: set[str] = {n.id for n in supervisor.program.nodes}

    def propose(
        self, program: Program, ask: ChangeAsk = ChangeAsk()
    ) -> tuple[LivePlan, int | None]:
        """Plan the change of the running program into ``program`` (compiled from a file;
        ``ask.source``: which file and parameters, for the record) and, unless it is
        refused, a dry run, empty, or would stop the program or lose work and is not
        ``ask.confirmed`` (``plan.confirm`` says why), begin it in the background. The
        plan, and the change's generation (None when nothing was begun)."""
        refused = []
        phase = self._phase()
        if phase != "running":
            refused.append(f"the run is {phase}: a change is applied to a running program")
        if not self._backend.can_update:
            refused.append(f"the {self._backend.name} backend cannot change a running program")
        else:  # the backend is asked about the program as it would run (processes kept)
            found = preflight_update(as_applied(self._sup.program, program), self._backend)
            refused += [d.headline() for d in found if d.severity == "error"]
        if self.busy:
            refused.append("another change is being applied to this run")
        plan = plan_change(self._sup.program, program, refused)
        if plan.refused or plan.empty:
            return plan, None
        if self.hazards is not None:
            plan = replace(plan, confirm=tuple(self.hazards(plan, ask.keep_state)))
        if ask.dry_run or (plan.confirm and not ask.confirmed):
            return plan, None
        if not self.begin():
            return replace(plan, refused=("another change is being applied to this run",)), None
        from topo.ir.diff_printer import diff_to_dict, format_diff

        generation = self._sup.state.generation + 1
        record = ChangeRecord(
            self._run_dir, generation, diff_to_dict(plan.diff), format_diff(plan.diff), ask.source
        )
        threading.Thread(
            target=self._background,
            args=(plan, record, ask),
            name="topo-apply",
            daemon=True,
        ).start()
        return plan, generation

    def _background(self, plan: LivePlan, record: ChangeRecord, ask: ChangeAsk) -> None:
        snaps = self.snapshots
        if snaps is not None:
            snaps.changing = "no snapshot while a change is applied (topo apply); try again after"
        try:
            self.run(plan, record, ask, snaps)
        finally:
            self._done()

    def publish_initial(self) -> None:
        """The registry's membership of the program as it starts (generation 0)."""
        program = self._sup.program
        self._registry.set_members(0, group_table([program], self._live), holders([program]))

    def begin(self) -> bool:
        """Reserve the applier for one change; False if one is under way."""
        with self._lock:
            if self.busy:
                return False
            self.busy = True
            return True

    def run(
        self,
        plan: LivePlan,
        record: ChangeRecord,
        ask: ChangeAsk = ChangeAsk(),
        snaps: Snapshots | None = None,
    ) -> None:
        """Apply ``plan`` (after ``begin``); the outcome goes to ``record``. With
        ``ask.keep_state`` a node restarted with a new definition starts from the state it
        had (``save``/``restore``; one that cannot give it, from the newest snapshot's),
        else fresh. ``snaps``: the snapshotter held back meanwhile, let go at the end.
        The applier is free again (and snapshots possible) before the record says the
        change ended: whoever follows the record may change the run again at once."""
        result, error = "failed", "the change was cut short"
        try:
            self._apply(plan, record, ask)
            result, error = "applied", ""
        except ApplyInterrupted as exc:
            result, error = "interrupted", str(exc)
        except Exception as exc:
            result, error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            self._programs = [self._sup.program]
            if snaps is not None:
                snaps.changing = ""
            with self._lock:
                self.busy = False
            record.finish(result, error)
            self._emit("applied", message=record.summary(), generation=record.generation)

    def _apply(self, plan: LivePlan, record: ChangeRecord, ask: ChangeAsk) -> None:
        old, new = self._sup.program, plan.program
        authority = self._registry.authority
        members = {e.id: e.nodes for e in (*old.executables, *new.executables)}
        authority.set_members(members)  # the old ones end later, the new ones may join now
        self._backend.update(new)
        # program.json first: whoever sees the new generation (status.json) finds its program
        self._adopt(new, ask.source)
        self._call(lambda: self._sup.adopt_program(new))
        self._programs = [old, new]
        record.step("program", f"the run's program is generation {record.generation}")
        if plan.start:
            self._call(lambda: self._sup.start_exes(list(plan.start)))
            nodes = self._nodes_of(plan.start)
            self._wait_ready(nodes)
            self._join(nodes)
            record.step("start", f"started {_names(nodes)}", nodes=nodes)
        step = max(1, ask.max_unavailable)
        for i in range(0, len(plan.restart), step):
            batch = list(plan.restart[i : i + step])
            nodes = self._nodes_of(batch)
            self._leave(nodes)
            kept = []
            if self.snapshots is not None and ask.keep_state:
                kept = self.snapshots.hand_over(nodes)
            elif self.snapshots is not None:
                self.snapshots.start_fresh(nodes)
            self._end(batch, "restarted by topo apply")
            self._call(lambda b=batch: self._sup.start_exes(b))  # type: ignore[misc]
            try:
                self._wait_ready(nodes)
            except Exception:
                if self.snapshots is not None:
                    self.snapshots.forget_handed(kept)  # its next start: not that state
                raise
            self._join(nodes)
            with_state = f" (kept the state of {_names(kept)})" if kept else ""
            record.step("restart", f"restarted {_names(nodes)}{with_state}", nodes=nodes)
        if plan.stop:
            nodes = [n for e in plan.stop for n in old.executable_index[e].nodes]
            self._leave(nodes)
            time.sleep(DRAIN_S)
            self._end(list(plan.stop), "removed by topo apply")
            self._call(lambda: self._sup.drop(list(plan.stop)))
            record.step("stop", f"stopped {_names(nodes)}", nodes=nodes)
        authority.set_members({e.id: e.nodes for e in new.executables})
        self._programs = [new]
        self._publish()

    # -- steps ------------------------------------------------------------------------
    def _call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the supervisor's thread and wait for it."""
        return self._sup.call_soon(fn).result(timeout=60)

    def _check(self) -> None:
        if self._sup.stopping:
            raise ApplyInterrupted("the run began to stop; the change was not finished")

    def _nodes_of(self, exe_ids: Iterable[str]) -> list[str]:
        index = self._sup.program.executable_index
        return [n for e in exe_ids for n in index[e].nodes]

    def _wait_ready(self, nodes: list[str]) -> None:
        """Until every node is up (ready, or already finished)."""
        program = self._sup.program
        limit = max(program.group_of(n).ready_timeout_s for n in nodes) + READY_MARGIN_S
        end = time.monotonic() + limit
        states = self._sup.state.nodes
        exes = self._sup.state.exes

        def policy_restarts(node: str) -> int:
            exe = exes.get(states[node].exe)
            return 0 if exe is None else exe.failed_restarts

        before = {n: policy_restarts(n) for n in nodes}
        while True:
            self._check()
            waiting = [n for n in nodes if states[n].state not in RUNNING]
            if not waiting:
                return
            # a node that failed since, though it may be starting again by now (a quick
            # restart policy; a busy machine where this loop looks seldom)
            failed = [
                n
                for n in waiting
                if states[n].state in ("failed", "restarting") or policy_restarts(n) > before[n]
            ]
            if failed:
                raise RuntimeError(f"{_names(failed)} failed to start{self._why(failed[0])}")
            if time.monotonic() > end:
                raise TimeoutError(
                    f"{_names(waiting)} did not become ready within {limit:g}s "
                    f"({', '.join(sorted({states[n].state for n in waiting}))})"
                )
            time.sleep(0.02)

    def _why(self, node: str) -> str:
        """``: RuntimeError: ...``: the last line of the node's failure, if known."""
        exe = self._sup.state.exes.get(self._sup.state.nodes[node].exe)
        text = exe.failure[1].strip() if exe is not None and exe.failure else ""
        return f": {text.splitlines()[-1]}" if text else " (see its log)"

    def _end(self, exe_ids: list[str], why: str) -> None:
        """Ask these executables' nodes to end, and wait until they have."""
        self._call(lambda: self._sup.retire(exe_ids, why))
        exes = self._sup.state.exes
        end = time.monotonic() + self._sup.state.grace_s + EXIT_MARGIN_S
        while any(exes[e].runner is not None for e in exe_ids if e in exes):
            if time.monotonic() > end:
                left = [e for e in exe_ids if e in exes and exes[e].runner is not None]
                raise TimeoutError(f"{', '.join(left)} did not end")
            time.sleep(0.02)

    def _join(self, nodes: list[str]) -> None:
        self._live.update(nodes)
        self._publish()

    def _leave(self, nodes: list[str]) -> None:
        self._live.difference_update(nodes)
        self._publish()

    def _publish(self) -> None:
        """Announce the groups' live members and wait (``ACK_S`` at most) until every
        running executable holding a group has fetched them."""
        self._membership += 1
        generation = self._membership
        held = holders(self._programs)
        self._registry.set_members(generation, group_table(self._programs, self._live), held)
        exes = self._sup.state.exes
        end = time.monotonic() + ACK_S
        while time.monotonic() < end:
            waiting = [
                e
                for e in held
                if e in exes
                and exes[e].state == "running"
                and self._registry.fetched(e) < generation
            ]
            if not waiting:
                return
            time.sleep(0.01)


def _names(nodes: list[str]) -> str:
    from topo.ir.diff_printer import node_names

    return node_names(list(nodes))
