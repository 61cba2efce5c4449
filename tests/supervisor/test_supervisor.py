"""The ``Supervisor`` on its own: reports in, state changes, restarts and stops out.

No launcher, registry or thread: a tiny real ``Backend`` whose attempts are objects
that "exit" when killed (they report it to the supervisor like a backend does), and the
test calls ``step`` itself. Time-based rules (backoff, grace, ready timeouts) use short
real delays.
"""

from __future__ import annotations

import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import topo
from topo.backends.base import Backend, ExecutableRunner, JobContext, Sink
from topo.ir import Program
from topo.supervisor.reactions import Supervisor
from topo.supervisor.state import RunState
from topo.testing import wait_until

KILLED = -int(signal.SIGKILL)


class Attempt(ExecutableRunner):
    """One attempt of the scripted backend: killing it reports its exit."""

    def __init__(self, backend: ScriptedBackend, exe: str, attempt: int, pid: int) -> None:
        self.backend, self.exe, self.attempt, self.pid = backend, exe, attempt, pid

    def kill(self) -> None:
        self.backend.killed.append((self.exe, self.attempt))
        assert self.backend.sink is not None
        self.backend.sink.exited(self.exe, self.attempt, self.pid, KILLED)

    def dump_stacks(self, node: str) -> str:
        return f"stacks of {node}"


class ScriptedBackend(Backend):
    """Starts nothing: hands out attempts with made-up pids and remembers them."""

    name = "scripted"
    local_pids = False

    def __init__(self) -> None:
        self.sink: Sink | None = None
        self.starts: list[tuple[str, int]] = []
        self.killed: list[tuple[str, int]] = []

    def open(self, job: JobContext, sink: Sink) -> None:
        self.sink = sink

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        self.starts.append((exe, attempt))
        return Attempt(self, exe, attempt, 40_000 + len(self.starts))

    def close(self) -> None:
        pass


class Rig:
    """A supervisor of ``program`` on a scripted backend, and the events it emitted."""

    def __init__(self, program: Program, run_dir: Path, grace_s: float = 5.0) -> None:
        self.backend = ScriptedBackend()
        self.state = RunState.of(program, grace_s=grace_s)
        self.events: list[tuple[str, str | None, str]] = []
        self.sup = Supervisor(program, self.backend, self.state, self.emit)
        self.backend.sink = self.sup
        (run_dir / "logs").mkdir()
        self.sup.attach(run_dir, None, None, None)
        self.state.started_at = time.time()
        self.sup.start_all()

    def emit(
        self,
        kind: Any,
        node: str | None = None,
        exe: str | None = None,
        pid: int | None = None,
        message: str = "",
        **data: Any,
    ) -> None:
        self.events.append((kind, node or exe, message))

    def pid(self, exe: str) -> int:
        runner = self.state.exes[exe].runner
        assert runner is not None
        return runner.pid

    def steps_until(self, done: Any, limit: float = 5.0) -> bool:
        """Step until ``done()`` or the run is over; whether the run is over."""
        over = [False]

        def there() -> bool:  # a step at a time: the supervisor is driven, not waited on
            over[0] = self.sup.step()
            return over[0] or bool(done())

        wait_until(there, limit, what="the supervisor to get there", every=0)
        return over[0]

    def run_out(self) -> None:
        assert self.steps_until(lambda: False), "the run did not end"


def program(tmp_path: Path, text: str) -> Program:
    path = tmp_path / "topo.yaml"
    path.write_text(textwrap.dedent(text))
    return topo.load(path).program


@pytest.fixture
def two(tmp_path: Path) -> Program:
    return program(
        tmp_path,
        """
        name: two
        nodes:
          worker:
            target: examples.agents.producers:Producer
            args: {producer_id: 0}
            restart: {policy: on-failure, max_restarts: 1, backoff: {initial_s: 0.01}}
          other:
            target: examples.agents.producers:Producer
            args: {producer_id: 1}
        """,
    )


def test_ready_once_every_node_reported_it_and_stale_attempts_ignored(
    two: Program, tmp_path: Path
) -> None:
    rig = Rig(two, tmp_path)
    assert rig.backend.starts == [("worker", 0), ("other", 0)]
    assert {n.state for n in rig.state.nodes.values()} == {"starting"}
    rig.sup.node_status("ready", "worker", "worker", 0, rig.pid("worker"))
    rig.sup.node_status("ready", "other", "other", 7, rig.pid("other"))  # not this attempt
    rig.sup.step()
    rig.sup.step()
    assert rig.state.nodes["worker"].state == "running"
    assert rig.state.nodes["other"].state == "starting"
    assert not rig.state.all_ready.is_set() and rig.state.ready_at is None
    rig.sup.node_status("ready", "other", "other", 0, rig.pid("other"))
    rig.sup.step()
    assert rig.state.all_ready.is_set() and rig.state.ready_at is not None
    kind, who, message = rig.events[-1]
    assert kind == "ready" and who is None and message.startswith("all 2 nodes up in ")


def test_a_failure_restarts_then_gives_up_and_the_grace_period_kills_the_rest(
    two: Program, tmp_path: Path
) -> None:
    rig = Rig(two, tmp_path, grace_s=0.05)
    rig.sup.node_status("failed", "worker", "worker", 0, 1, "Traceback\nValueError: boom")
    rig.sup.exited("worker", 0, rig.pid("worker"), 1)
    rig.steps_until(lambda: ("worker", 1) in rig.backend.starts)
    assert rig.state.nodes["worker"].restarts == 1
    assert any(e[0] == "restarting" and "raised ValueError: boom" in e[2] for e in rig.events)
    assert rig.state.failure is None

    rig.sup.exited("worker", 1, rig.pid("worker"), 3)
    rig.run_out()
    failure = rig.state.failure
    assert failure is not None and failure.executable == "worker"
    assert "failed 2 times, giving up (max_restarts: 1)" in failure.message
    assert "exited with code 3" in failure.message
    assert rig.sup.stop_code == 1
    assert rig.state.stop_reason == failure.message
    assert rig.backend.killed == [("other", 0)]  # still running after the grace period
    assert any("after the 0.05s grace period" in w for w in rig.state.warnings)
    assert rig.state.exes["other"].state == "killed"
    assert rig.state.exes["worker"].state == "failed"
    log = (tmp_path / "logs" / "worker.log").read_text()
    assert "attempt 2 ended" in log and "exit code 3" in log


def test_an_attempt_lost_with_its_host_before_it_ran_restarts_without_counting(
    two: Program, tmp_path: Path
) -> None:
    """A host lost under an attempt that never ran (it waited for the host's agent: a
    node dying, its death not yet declared) is not a failure of the node's own: it
    starts elsewhere and its restart budget is kept (max_restarts: 1 here)."""
    rig = Rig(two, tmp_path, grace_s=0.05)
    rig.sup.exited("worker", 0, rig.pid("worker"), KILLED, "was lost: its agent died")
    rig.steps_until(lambda: ("worker", 1) in rig.backend.starts)
    assert rig.state.exes["worker"].failed_restarts == 1
    lost = "was lost with Ray node 10.0.0.3: Ray declared it dead"
    rig.sup.exited("worker", 1, 0, KILLED, lost, started=False)
    rig.steps_until(lambda: ("worker", 2) in rig.backend.starts)
    assert rig.state.failure is None and rig.state.exes["worker"].failed_restarts == 1
    assert rig.state.nodes["worker"].restarts == 2
    said = [e[2] for e in rig.events if e[0] == "restarting"][-1]
    assert said.startswith(lost) and "no restart counted" in said, said

    rig.sup.exited("worker", 2, rig.pid("worker"), 3)  # a failure of its own: over budget
    rig.run_out()
    assert rig.state.failure is not None
    assert "failed 2 times, giving up (max_restarts: 1)" in rig.state.failure.message


def test_every_node_finished_is_a_clean_stop(two: Program, tmp_path: Path) -> None:
    rig = Rig(two, tmp_path)
    for exe in ("worker", "other"):
        rig.sup.node_status("finished", exe, exe, 0, rig.pid(exe))
        rig.sup.exited(exe, 0, rig.pid(exe), 0)
    rig.run_out()
    assert rig.sup.stop_code == 0
    assert rig.state.stop_reason == "every node finished"
    assert {n.state for n in rig.state.nodes.values()} == {"finished"}
    assert rig.backend.killed == []


def test_a_requested_stop_keeps_its_code_and_a_kill_ends_the_run(
    two: Program, tmp_path: Path
) -> None:
    rig = Rig(two, tmp_path)
    rig.sup.request_stop("interrupted", code=130)
    rig.sup.step()
    assert rig.state.stop_reason == "interrupted"
    assert ("stopping", None, "interrupted") in rig.events
    rig.sup.exited("worker", 0, rig.pid("worker"), 0)  # stopped in time
    rig.sup.step()
    assert rig.state.exes["worker"].state == "stopped"
    rig.sup.kill()  # a second Ctrl-C: no grace for the other one
    rig.run_out()
    assert rig.backend.killed == [("other", 0)]
    assert rig.state.exes["other"].state == "killed"
    assert rig.sup.stop_code == 130
    assert rig.state.failure is None


def test_a_node_not_ready_in_time_is_killed_and_fails_the_run(tmp_path: Path) -> None:
    slow = program(
        tmp_path,
        """
        name: slow
        nodes:
          slow:
            target: examples.agents.producers:Producer
            args: {producer_id: 0}
            ready_timeout_s: 0.1
        """,
    )
    rig = Rig(slow, tmp_path, grace_s=0.05)
    rig.run_out()
    assert rig.backend.killed == [("slow", 0)]
    failure = rig.state.failure
    assert failure is not None and failure.traceback == "stacks of slow"
    assert "did not become ready within 0.1s" in failure.message
    assert rig.sup.stop_code == 1


def test_the_messages_read_well_for_one_node_and_a_reason_ending_in_a_full_stop(
    tmp_path: Path,
) -> None:
    """One node: "the node is up" (not "all 1 nodes up"); and a backend's reason that ends in a
    full stop (Ray's) is not followed by "; restart" after it."""
    one = program(
        tmp_path,
        """
        name: one
        nodes:
          worker:
            target: examples.agents.producers:Producer
            args: {producer_id: 0}
            restart: {policy: on-failure, max_restarts: 1, backoff: {initial_s: 0.01}}
        """,
    )
    rig = Rig(one, tmp_path)
    rig.sup.node_status("ready", "worker", "worker", 0, rig.pid("worker"))
    rig.sup.step()
    kind, who, message = rig.events[-1]
    assert kind == "ready" and who is None and message.startswith("the node is up in "), message
    died = "its Ray actor died: The actor died unexpectedly before finishing this task."
    rig.sup.exited("worker", 0, rig.pid("worker"), KILLED, died)
    rig.steps_until(lambda: ("worker", 1) in rig.backend.starts)
    [restart] = [m for k, _, m in rig.events if k == "restarting"]
    assert restart == f"{died[:-1]}; restart 1/1 in 0.01s", restart
