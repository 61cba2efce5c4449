"""Conformance: a program starts, its nodes become ready and serve, run() is called (not
with ``disable_run``), and the program stops -- when a node with ``stops_program``
returns, or when a node calls ``topo.stop()`` -- with exit 0 and no process left."""

from __future__ import annotations

import pytest

from topo.rundir.layout import PROGRAM_FILE, TOPOLOGY_FILE
from topo.testing.suite.harness import NODES, Harness, status
from topo.testing.waiting import Events

PIPELINE = f"""
name: pipeline
nodes:
  producer: {{target: "{NODES}:Producer", count: 2}}
  consumer:
    target: "{NODES}:Consumer"
    args: {{producers: "@producer", items: 6}}
    stops_program: true
"""

STOPPER = f"""
name: stopper
nodes:
  echo: {{target: "{NODES}:Echo", count: 2}}
  greeter: {{kind: py, target: "{NODES}:hello", args: {{greeting: hi}}}}
  raiser: {{target: "{NODES}:RaisesOnStop"}}
  stopper: {{target: "{NODES}:Stopper", args: {{peers: "@echo"}}}}
"""

SERVED = f"""
name: served
nodes:
  runner: {{target: "{NODES}:Runner"}}
  wrapper: {{target: "{NODES}:Wrapper"}}
  sleeper: {{target: "{NODES}:Sleeper", rpc: {{call_timeout_s: 3}}}}
  asker: {{target: "{NODES}:Asker", args: {{peer: "@sleeper"}}, rpc: {{deadline_s: 30}}}}
"""


class Lifecycle:
    """Start, ready, run() returns, the program stops."""

    def test_a_program_runs_to_its_end(self, suite: Harness) -> None:
        events = Events()
        run = suite.launch(suite.write(PIPELINE), listeners=[events])
        pids = suite.node_pids(run)
        assert run.wait(suite.ut.ready_s) == 0
        said = "6 results from 2 producers, sum 55"
        assert said in run.log("consumer")
        events.wait_for("log", "consumer", said)  # the launcher's log source relayed it
        record = status(run.run_dir)
        assert record["exit_code"] == 0 and "consumer finished" in record["stop_reason"]
        assert {n["state"] for n in record["nodes"]} == {"finished"}
        assert (run.run_dir / PROGRAM_FILE).is_file()
        assert "stops_program: true" in (run.run_dir / TOPOLOGY_FILE).read_text()
        suite.assert_nothing_left(run, pids)

    def test_a_node_stops_the_program_and_an_error_while_stopping_is_clean(
        self, suite: Harness
    ) -> None:
        run = suite.launch(suite.write(STOPPER))
        assert run.wait(suite.ut.ready_s) == 0
        assert run.failure is None
        record = status(run.run_dir)
        assert record["stop_reason"].startswith("stopper is done"), record["stop_reason"]
        assert "answers: ['pong', 'pong']" in run.log("stopper")
        assert "hi from greeter" in run.log("greeter")  # a py node: a function, run once
        assert {s.state for s in run.status() if s.id == "raiser"} == {"finished"}
        assert "peer went away while stopping" in run.log("raiser")
        suite.assert_nothing_left(run)

    @pytest.mark.slow
    def test_nodes_serve_their_methods_and_run_is_not_called_when_disabled(
        self, suite: Harness
    ) -> None:
        run = suite.launch(suite.write(SERVED), disable_run=True)  # the flag reaches each node
        assert run.handle("runner", timeout=30).did_run() is False
        wrapper = run.handle("wrapper", timeout=30)
        assert wrapper.step() == "inner step"  # listed by the instance's __dir__ only
        assert wrapper.own() == "own"
        asker = run.handle("asker", timeout=30)
        assert asker.ask(0.0) == "rested"
        # The callee's call_timeout_s (3 s: a busy machine may take a second to answer a
        # nap of none) beats the caller's deadline (30 s).
        answer = asker.ask(4.0)  # over by the stop: it ends within its grace
        assert answer.startswith("DeadlineExceeded"), answer
        pids = suite.node_pids(run)
        assert run.stop(timeout=60) == 0
        assert not [w for w in status(run.run_dir)["warnings"] if "grace period" in w]
        suite.assert_nothing_left(run, pids)
