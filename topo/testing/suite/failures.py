"""Conformance: a node that fails is named, with its traceback shown once and kept in its
log, and the run exits 1; ``restart: {policy: on-failure}`` starts it again until
``max_restarts``; a node whose process is killed restarts where it ran, or fails the
run; a node over its group's memory limit is ended and named as the reason."""

from __future__ import annotations

import pytest

from topo.testing.suite.harness import NODES, Harness, log_of, status
from topo.testing.waiting import wait_until

CRASH = f"""
name: crash
nodes:
  echo: {{target: "{NODES}:Echo"}}
  crasher: {{target: "{NODES}:Crasher", args: {{message: unique-boom-4711}}}}
"""

FLAKY = f"""
name: flaky
nodes:
  echo: {{target: "{NODES}:Echo"}}
  crasher:
    target: "{NODES}:Crasher"
    args: {{message: again}}
    restart: {{policy: on-failure, max_restarts: 2, backoff: {{initial_s: 0.05}}}}
"""

KILLED = f"""
name: killed
nodes:
  echo:
    target: "{NODES}:Echo"
    count: 2
    restart: {{policy: on-failure, max_restarts: 3, backoff: {{initial_s: 0.05}}}}
  fragile: {{target: "{NODES}:Echo"}}
"""

LEAK = f"""
name: leak
nodes:
  leaker:
    target: "{NODES}:Leaker"
    resources: {{memory: 250MiB}}
    restart: {{policy: on-failure, max_restarts: 1, backoff: {{initial_s: 0.05}}}}
"""


class Failures:
    """Failures and restart policies."""

    def test_a_node_that_raises_is_named_with_its_traceback_once_and_exit_1(
        self, suite: Harness
    ) -> None:
        run_dir = suite.tmp / "run"
        args = suite.run_args(suite.write(CRASH), "--no-live", "--run-dir", str(run_dir))
        done = suite.topo(*args, timeout=240)
        out = done.stdout + done.stderr
        assert done.returncode == 1, out[-3000:]
        assert out.count("ValueError: unique-boom-4711") == 1, out[-3000:]
        assert "node crasher" in done.stderr and "raised an exception" in done.stderr, out
        failure = status(run_dir)["failure"]
        assert failure["node"] == "crasher" and "raised an exception" in failure["message"]
        log = log_of(run_dir, "crasher")  # its output and its traceback, in its log
        assert "about to fail: unique-boom-4711" in log and "ValueError: unique-boom-4711" in log
        assert "in run" in log
        suite.assert_nothing_left(pids=[n["pid"] for n in status(run_dir)["nodes"] if n["pid"]])

    def test_on_failure_restarts_until_max_restarts(self, suite: Harness) -> None:
        run = suite.launch(suite.write(FLAKY))
        assert run.wait(suite.ut.ready_s + 60) == 1
        assert run.failure is not None and run.failure.node == "crasher"
        assert "failed 3 times" in run.failure.message, run.failure.message
        assert "max_restarts: 2" in run.failure.message
        assert {s.id: s.restarts for s in run.status()}["crasher"] == 2
        assert run.log("crasher").count("about to fail: again") == 3
        suite.assert_nothing_left(run)

    def test_a_killed_process_restarts_where_it_ran_or_fails_the_run(self, suite: Harness) -> None:
        suite.needs("kill")
        run = suite.launch(suite.write(KILLED))
        echo = run.handle("echo/1", timeout=30)
        first = echo.where()
        suite.kill(first["pid"])
        wait_until(
            lambda: {s.id: s for s in run.status()}["echo/1"].restarts == 1,
            30,
            what="echo/1 to be restarted",
        )
        second = wait_until(echo.where, 30, what="echo/1 to serve again", errors=(Exception,))
        assert second["node"] == "echo/1" and second["pid"] != first["pid"]
        assert second["host"] == first["host"]  # its host is alive: it restarts there
        assert run.handle("echo/0").ping() == "pong" and run.exit_code is None
        fragile = run.handle("fragile", timeout=30).where()
        suite.kill(fragile["pid"])  # no restart policy: the run fails
        assert run.wait(60) == 1
        assert run.failure is not None and run.failure.node == "fragile"
        assert "SIGKILL" in run.failure.message, run.failure.message
        suite.assert_nothing_left(run, [first["pid"], second["pid"], fragile["pid"]])

    @pytest.mark.slow
    def test_a_node_over_its_memory_limit_is_ended_and_named(self, suite: Harness) -> None:
        suite.needs("memory")
        run = suite.launch(suite.write(LEAK))
        assert run.wait(suite.ut.ready_s + 60) == 1
        assert run.failure is not None and run.failure.node == "leaker"
        assert "exceeded its memory limit 250 MiB" in run.failure.message, run.failure.message
        assert "failed 2 times" in run.failure.message  # restarted once, as its policy says
        assert "exceeded its memory limit 250 MiB" in run.log("leaker")
        suite.assert_nothing_left(run)
