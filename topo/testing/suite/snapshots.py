"""Conformance: a snapshot taken while the nodes work is one consistent point (a counter
fed by steppers holds the sum of their steps), is written in the launcher's run
directory, and a new run started from it takes every node's state back; ``topo stacks``,
through the same door of each node, shows a node's loop without stopping it, and
``topo debug`` drives the pdb of a node stopped at ``breakpoint()``."""

from __future__ import annotations

import pickle
import random
from functools import partial
from typing import Any

import pytest

from topo.testing.suite.harness import NODES, Harness
from topo.testing.waiting import wait_until

BREAKER = f"""
name: breaker
nodes:
  breaker: {{target: "{NODES}:Breaker"}}
"""

STEPS = f"""
name: steps
nodes:
  counter: {{target: "topo.nodes:Counter"}}
  stepper: {{target: "{NODES}:Stepper", count: 2, args: {{counter: "@counter"}}}}
"""


def states(snap: Any) -> dict[str, Any]:
    """Node -> its saved state in snapshot ``snap``."""
    return {n: pickle.loads(snap.state(n)) for n in snap.nodes}


def drawn(node: Any) -> dict[str, Any] | None:
    """A stepper's status once its run() has drawn from its stream."""
    status: dict[str, Any] = node.status()
    return status if status["first_draw"] is not None else None


class Snapshots:
    """Save, check, restore (``topo snapshot`` and ``--resume``: ``Detached``)."""

    @pytest.mark.slow
    def test_a_snapshot_is_consistent_and_a_new_run_starts_from_it(self, suite: Harness) -> None:
        path = suite.write(STEPS)
        run = suite.launch(path)
        stepper = run.handle("stepper/1", timeout=30)
        wait_until(lambda: stepper.status()["steps"] > 20, 60, what="stepper/1 to step")
        for _ in range(2):  # taken while the steppers and the counter keep moving
            snap = run.snapshot()
            saved = states(snap)
            steps = [saved["stepper/0"]["steps"], saved["stepper/1"]["steps"]]
            assert saved["counter"]["counts"]["steps"] == sum(steps) > 0, saved
            assert snap.still_moving == {}
        assert snap.path.is_relative_to(run.run_dir)  # on the launcher's machine
        assert snap.number == 2 and snap.nodes["stepper/1"].target == f"{NODES}:Stepper"
        after = stepper.status()["steps"]  # let go once it is taken: the nodes go on
        wait_until(lambda: stepper.status()["steps"] > after + 20, 60, what="steps after it")
        # topo stacks goes through the same door: the loop's stack, the node not stopped
        answer = run.launcher.node_stacks(["stepper/1"])
        assert answer["ok"] and list(answer["stacks"]) == ["stepper/1"], answer
        text = answer["stacks"]["stepper/1"]
        assert "topo/testing/nodes.py" in text and ", in run\n" in text, text
        after = stepper.status()["steps"]
        wait_until(lambda: stepper.status()["steps"] > after + 20, 60, what="steps after stacks")
        assert run.stop(timeout=60) == 0

        again = suite.launch(path, start_from=snap.path)
        for i in range(2):
            node = again.handle(f"stepper/{i}", timeout=30)
            status = wait_until(partial(drawn, node), 30, what=f"stepper/{i} to draw")
            assert status["restored_from"] == steps[i]
            stream = random.Random()
            stream.setstate(saved[f"stepper/{i}"]["rng"])
            assert status["first_draw"] == stream.random()  # the stream goes on, not anew
        assert again.handle("counter", timeout=30).get_counts()["steps"] >= sum(steps)
        wait_until(lambda: "restored at step" in again.log("stepper/0"), 30, what="its log")
        assert again.stop(timeout=60) == 0
        suite.assert_nothing_left(again)

    @pytest.mark.slow
    def test_a_node_at_a_breakpoint_is_debugged_and_goes_on(self, suite: Harness) -> None:
        run = suite.launch(suite.write(BREAKER))
        node = run.launcher.state.nodes["breaker"]
        wait_until(lambda: node.breakpoint, 60, what="the node at its breakpoint")
        assert str(node.breakpoint).startswith("nodes.py:"), node.breakpoint

        def until_prompt(again: bool = False) -> str:
            seen = ""
            while not seen.endswith("(Pdb) "):
                answer = run.launcher.debug("breaker", "read", "", 5.0, again)
                assert answer["ok"] and answer["active"], (answer, seen)
                seen, again = seen + answer["output"], False
            return seen

        assert "-> value += 1" in until_prompt(again=True)
        run.launcher.debug("breaker", "write", "p value", 0.0)
        assert until_prompt().startswith("41")
        run.launcher.debug("breaker", "write", "c", 0.0)
        wait_until(lambda: node.breakpoint is None, 60, what="the node let go")
        answer = run.launcher.debug("breaker", "read", "", 1.0)
        assert answer["ok"] and not answer["active"], answer
