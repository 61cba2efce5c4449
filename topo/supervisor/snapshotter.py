"""The launcher's snapshots of a running program: pause every node, save each state,
let them all go, write the states atomically (``topo.rundir.snapshots``).

Every node is asked to pause at once; each holds its threads at their next pause point
(``topo.pausepoint``), so nothing that calls another node moves while the states are
taken: the counter's counts, the learner's step and the replay's items are of one
moment. States travel to the launcher over the run's authenticated RPC and are written
in its run directory, so a host lost later loses nothing that was snapshotted.

The same object serves the states a node starts from (``RegistryService.states``): a
resumed run's snapshot at first, then the newest snapshot of this run, so a node that
crashed and is restarted takes its state back instead of starting empty.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from topo.ir import Program
from topo.ir.program import SnapshotSettings
from topo.ir.structure import node_target, structure_digest
from topo.kinds import get_kind
from topo.rundir.snapshots import Snapshot, SnapshotError, human_size, write_snapshot
from topo.runtime import Handle, ProgramContext, RegistryServer, connect_program
from topo.runtime.node_state import LATER, STATE_METHOD, state_proof
from topo.supervisor.node_restart import Handed

SAVE_DEADLINE_S = 300.0  # a replay's checkpoint of many items can take a while
# Snapshots on a clock hold the program at most this share of the time: after a pause of
# p seconds the next waits at least p * (1 / share - 1), whatever every_s asks (on a
# loaded machine a pause takes longer, and every_s: 5 held it still half the time).
MAX_PAUSE_SHARE = 0.05
CLOCK = "every "  # how the reason of a snapshot on the clock begins ("every 300s")
RUNNING = ("running", "starting")
Say = Callable[[bool, str, dict[str, Any]], None]  # (ok, message, figures)


class Snapshotter:
    """Takes and serves one run's snapshots."""

    def __init__(
        self,
        program: Program,
        run_dir: Path,
        registry: RegistryServer,
        node_state: Callable[[str], tuple[str, int, int | None]],
        say: Say,
        start_from: Snapshot | None = None,
        running: Callable[[], bool] = lambda: True,
    ) -> None:
        self.program = program
        self.run_dir = run_dir
        self.settings: SnapshotSettings = program.snapshots
        self.structure = structure_digest(program)
        self._registry = registry
        self._node_state = node_state
        self._say = say
        # False while starting and once stopping (by the launcher or the program itself)
        self.running: Callable[[], bool] = lambda: running() and not registry.stop_event.is_set()
        self._lock = threading.Lock()
        self._latest = start_from
        # node -> the state it handed over (topo apply, topo restart); nodes to start
        # fresh (--fresh): both until a snapshot holds a newer state of the node
        self._handed: dict[str, bytes] = {}
        self._fresh: set[str] = set()
        self._client: ProgramContext | None = None  # made when first needed
        self._client_lock = threading.Lock()
        self._stop = threading.Event()
        self._clock: threading.Thread | None = None
        self.served = _served(program)
        self.changing = ""  # why no snapshot can be taken now (topo apply changes the program)
        self.spacing_s = 0.0  # the clock's least wait after the last pause (MAX_PAUSE_SHARE)

    def adopt(self, program: Program) -> None:
        """The run's program is ``program`` from now on (``topo apply``): its nodes and
        snapshot settings; a clock started if it now has one."""
        with self._lock:
            self.program = program
            self.settings = program.snapshots
            self.structure = structure_digest(program)
            self.served = _served(program)
        if self._clock is None:
            self.start_clock()

    # -- what a starting node restores ------------------------------------------------
    def state_for(self, node_id: str) -> bytes | None:
        """The state ``node_id`` is to start from: none when it is to start fresh, the one
        it handed over when ``topo apply`` or ``topo restart`` restarted it (until the
        next snapshot), else the newest snapshot's, or None."""
        if node_id in self._fresh:
            return None
        handed = self._handed.get(node_id)
        if handed is not None:
            return handed
        snapshot = self._latest
        return None if snapshot is None else snapshot.state(node_id)

    def start_source(self, node_id: str) -> tuple[str, Snapshot | None]:
        """Where ``state_for`` takes ``node_id``'s state from: ``fresh`` (none),
        ``handed`` (the state it handed over), ``snapshot`` (that snapshot's), or
        ``none`` (no snapshot holds one)."""
        if node_id in self._fresh:
            return "fresh", None
        if node_id in self._handed:
            return "handed", None
        snapshot = self._latest
        if snapshot is not None and node_id in snapshot.nodes:
            return "snapshot", snapshot
        return "none", None

    def hand_over(self, node_ids: list[str]) -> list[str]:
        """Take the state of these running nodes now (paused for it, then let go), for
        their next start (``topo apply`` restarts them with a new definition: a learner
        keeps its parameters). The nodes whose state was taken; one that cannot give
        it starts from the newest snapshot instead."""
        return [n for n, got in self.take_states(node_ids).items() if isinstance(got, Handed)]

    def take_states(self, node_ids: list[str]) -> dict[str, Handed | str | None]:
        """``hand_over``, saying for each served node what it gave: its state's size (and
        the threads the pause bound left moving), None when it keeps none (no ``save``),
        or why it could not give it."""
        out: dict[str, Handed | str | None] = {}
        with self._lock:
            for node_id in node_ids:
                if node_id not in self.served:
                    continue
                # The pause is served beside busy handlers (the pool's aside methods) and
                # ends within the snapshots' own bound, not a save's minutes.
                timeout = self.settings.pause_timeout_s
                pausing = self._handle(node_id, timeout + 30)
                proof = self._proof(node_id)
                try:
                    moving = pausing.call(STATE_METHOD, proof, "pause", timeout)
                    saving = self._handle(node_id, SAVE_DEADLINE_S)
                    data = saving.call(STATE_METHOD, proof, "save")
                    if data == LATER:  # (the node restarts next: no need to let it go first)
                        data = saving.call(STATE_METHOD, proof, "collect")
                except Exception as exc:
                    out[node_id] = f"its save() failed: {type(exc).__name__}: {exc}"
                    continue
                finally:  # not waited for: the node restarts next
                    self._resume([node_id], wait=False)
                out[node_id] = None if data is None else Handed(len(data), tuple(moving or ()))
                if data is not None:
                    self._handed[node_id] = data
                    self._fresh.discard(node_id)
        return out

    def start_fresh(self, node_ids: list[str]) -> None:
        """These nodes start with no state at their next start (``--fresh``), not the
        newest snapshot's, until a snapshot holds a newer state of theirs."""
        for node_id in node_ids:
            self._handed.pop(node_id, None)
            self._fresh.add(node_id)

    def forget_handed(self, node_ids: list[str]) -> None:
        """Drop states handed over (a node whose new definition failed to start)."""
        for node_id in node_ids:
            self._handed.pop(node_id, None)

    # -- what a change asks of the running nodes (topo.supervisor.hazards) ---------------
    def keeps_state(self, node_ids: list[str]) -> dict[str, bool]:
        """Which of these running served nodes keep a state (``save``/``restore``) now;
        a node that does not answer within a few seconds is not listed."""
        asked = {
            n: self._handle(n, 10.0).submit(STATE_METHOD, self._proof(n), "has_state")
            for n in node_ids
            if n in self.served and self._node_state(n)[0] in RUNNING
        }
        found = {}
        for node_id, fut in asked.items():
            try:
                found[node_id] = bool(fut.result(timeout=10.0))
            except Exception:
                continue
        return found

    def counts(self, node_id: str) -> dict[str, Any] | None:
        """A running counter node's counts now (``get_counts``); None if it cannot say."""
        if node_id not in self.served or self._node_state(node_id)[0] not in RUNNING:
            return None
        try:
            found = self._handle(node_id, 5.0).call("get_counts")
        except Exception:
            return None
        return found if isinstance(found, dict) else None

    # -- taking one --------------------------------------------------------------------
    def take(self, reason: str) -> Snapshot:
        """Pause, save, resume, write: the snapshot as written. One at a time."""
        with self._lock:
            return self._take(reason)

    def ask(self, node_id: str, op: str, timeout: float, *args: Any) -> Future[Any]:
        """Send ``op`` (with ``args``) to ``node_id``'s state door (``stacks``: ``topo
        stacks``; ``debug``: ``topo debug``)."""
        handle = self._handle(node_id, timeout)
        return handle.submit(STATE_METHOD, self._proof(node_id), op, *args)

    def _handle(self, node_id: str, timeout: float) -> Handle:
        with self._client_lock:
            if self._client is None:
                self._client = connect_program(self._registry.info)
            return Handle(node_id, timeout, program=self._client)

    def _proof(self, node_id: str) -> str:
        return state_proof(self._registry.authority.server_secret(node_id))

    def _take(self, reason: str) -> Snapshot:
        if not self.running():
            raise SnapshotError("the run is not running (it is starting or stopping)")
        if self.changing:
            raise SnapshotError(self.changing)
        before = {n: self._node_state(n) for n in self.served}
        up = [n for n in self.served if before[n][0] in RUNNING]
        if not up:
            raise SnapshotError("no node is running: there is nothing to snapshot")
        timeout = self.settings.pause_timeout_s
        started = time.monotonic()
        pauses = {
            n: self._handle(n, timeout + 30).submit(STATE_METHOD, self._proof(n), "pause", timeout)
            for n in up
        }
        try:
            moving: dict[str, list[str]] = {}
            for node_id, fut in pauses.items():
                threads = self._result(fut, node_id, "pause", before[node_id])
                if threads:
                    moving[node_id] = list(threads)
            paused_s = time.monotonic() - started
            if not self.running():  # nodes stopping are let go at once: not one moment
                raise SnapshotError("the program began to stop while the snapshot was taken")
            saves = {
                n: self._handle(n, SAVE_DEADLINE_S).submit(STATE_METHOD, self._proof(n), "save")
                for n in up
            }
            states: dict[str, bytes] = {}
            follows: list[str] = []  # nodes that captured their state and build it after
            for node_id, fut in saves.items():
                data = self._result(fut, node_id, "save", before[node_id])
                if data == LATER:
                    follows.append(node_id)
                elif data is not None:
                    states[node_id] = data
            counts = self._counts(up)
            for node_id in up:  # a state saved by a new attempt is not of the paused moment
                self._same_attempt(node_id, before[node_id])
        finally:
            self._resume(up)
        pause_s = time.monotonic() - started
        collects = {
            n: self._handle(n, SAVE_DEADLINE_S).submit(STATE_METHOD, self._proof(n), "collect")
            for n in follows
        }
        for node_id, fut in collects.items():
            states[node_id] = self._result(fut, node_id, "build", before[node_id])
        built_s = time.monotonic() - started - pause_s
        saved = set(states)
        carried = self._carry(states, up)
        snapshot = write_snapshot(
            self.run_dir,
            states,
            program=self.program.name,
            structure=self.structure,
            pause_s=pause_s,
            targets={n: node_target(self.program, n) for n in states},
            counts=counts,
            still_moving=moving,
            reason=reason,
            keep=self.settings.keep,
        )
        self._latest = snapshot
        for node_id in saved:  # the snapshot has newer states of them
            self._handed.pop(node_id, None)
            self._fresh.discard(node_id)
        notes = []
        self.spacing_s = pause_s * (1 / MAX_PAUSE_SHARE - 1)
        on_clock = reason.startswith(CLOCK)
        if on_clock and self.settings.every_s and self.spacing_s > self.settings.every_s:
            notes.append(
                f"the next in {self.spacing_s:.0f}s, not {self.settings.every_s:g}s "
                f"(snapshots hold the program at most {MAX_PAUSE_SHARE:.0%} of the time)"
            )
        if moving:
            notes.append(f"not paused: {', '.join(sorted(moving))}")
        if carried:
            notes.append(f"kept from the last snapshot: {', '.join(carried)}")
        self._say(
            True,
            f"snapshot {snapshot.number} ({reason}): {len(states)} node state(s), "
            f"{human_size(snapshot.size)}, paused {pause_s:.2f}s"
            + (f" (pausing took {paused_s:.2f}s)" if paused_s > 1 else "")
            + (f", built after it in {built_s:.2f}s" if follows else "")
            + (f"; {'; '.join(notes)}" if notes else ""),
            {"number": snapshot.number, "pause_s": pause_s, "bytes": snapshot.size},
        )
        return snapshot

    def _same_attempt(self, node_id: str, before: tuple[str, int, int | None]) -> None:
        now = self._node_state(node_id)
        if now[0] not in RUNNING or now[1:] != before[1:]:
            raise SnapshotError(
                f"node {node_id!r} ended or restarted while the snapshot was taken; the "
                "snapshot is dropped (the previous one stays the newest)"
            )

    def _result(
        self, fut: Future, node_id: str, what: str, before: tuple[str, int, int | None]
    ) -> Any:
        """The reply of a pause or save call, given up as soon as the node is gone."""
        while True:
            try:
                return fut.result(timeout=0.2)
            except FutureTimeout:
                self._same_attempt(node_id, before)
            except Exception as exc:
                raise SnapshotError(f"node {node_id!r} could not {what} its state: {exc}") from exc

    def _counts(self, up: list[str]) -> dict[str, Any]:
        """The counters' counts at the snapshot (shown in its manifest)."""
        counts: dict[str, Any] = {}
        for node_id in up:
            if node_target(self.program, node_id) == "topo.nodes:Counter":
                try:
                    counts[node_id] = self._handle(node_id, 10.0).call("get_counts")
                except Exception as exc:  # the snapshot does not depend on it
                    counts[node_id] = f"unread: {exc!r:.200}"
        return counts

    def _resume(self, up: list[str], wait: bool = True) -> None:
        futures = [self._handle(n, 10.0).submit(STATE_METHOD, self._proof(n), "resume") for n in up]
        if not wait:
            return
        end = time.monotonic() + 15.0  # the calls' own 10 s deadline, and a bound of our own
        for fut in futures:
            try:
                fut.result(timeout=max(0.0, end - time.monotonic()))
            except Exception:  # a node that ended meanwhile has nothing to resume
                pass

    def _carry(self, states: dict[str, bytes], up: list[str]) -> list[str]:
        """Nodes down at this snapshot keep the state they are to start from: the one
        they handed over, else the previous snapshot's (none when they start fresh)."""
        previous = self._latest
        down = [n for n in self.served if n not in up and n not in states]
        carried = []
        for node_id in down:  # (a node removed by topo apply is not served any more)
            if node_id in self._fresh:
                continue
            data = self._handed.get(node_id)
            if data is None and previous is not None:
                data = previous.state(node_id)
            if data is not None:
                states[node_id] = data
                carried.append(node_id)
        return carried

    # -- on a clock, and at the stop -------------------------------------------------
    def start_clock(self) -> None:
        """Take a snapshot every ``every_s`` seconds until ``close``."""
        every = self.settings.every_s
        if not every:
            return
        self._clock = threading.Thread(
            target=self._tick, args=(every,), name="topo-snapshots", daemon=True
        )
        self._clock.start()

    def _tick(self, every: float) -> None:
        wait = every
        while not self._stop.wait(wait):
            if self.running() and self.settings.every_s:
                self.try_take(f"{CLOCK}{every:g}s")
            every = self.settings.every_s or every  # (topo apply may change it)
            wait = max(every, self.spacing_s)

    def try_take(self, reason: str) -> Snapshot | None:
        """``take``, telling the user instead of raising when it fails."""
        try:
            return self.take(reason)
        except Exception as exc:
            self._say(False, f"snapshot failed ({reason}): {exc}", {})
            return None

    def close(self) -> None:
        """Stop the clock (a snapshot under way finishes first)."""
        self._stop.set()
        if self._clock is not None:
            self._clock.join(timeout=SAVE_DEADLINE_S)
        with self._lock:
            if self._client is not None:
                self._client.address_book.close()


def _served(program: Program) -> list[str]:
    """The nodes of ``program`` that serve RPC (those a snapshot pauses and saves)."""
    return [n.id for n in program.nodes if get_kind(program.kind_of(n.id)).served is True]
