"""Conformance: least privilege. A node reaches only the nodes its arguments refer to
and those whose handles it is passed in a call; any other call is refused by the
callee (``PermissionDenied``, promptly, before a byte of it is unpickled); a node holds
no secret and cannot serve or register as another; the launcher's handles reach all."""

from __future__ import annotations

import pytest

from topo.testing.suite.harness import RIGHTS_NODES, Harness

RIGHTS = f"""
name: rights
nodes:
  learner: {{target: "{RIGHTS_NODES}:Learner"}}
  actor: {{target: "{RIGHTS_NODES}:Actor", args: {{learner: "@learner"}}}}
  broker: {{target: "{RIGHTS_NODES}:Broker", args: {{learner: "@learner", rogue: "@rogue"}}}}
  rogue: {{target: "{RIGHTS_NODES}:Rogue"}}
"""


class Rights:
    """Who may call whom."""

    def test_a_node_reaches_only_what_it_was_wired_or_handed(self, suite: Harness) -> None:
        from topo.runtime import PermissionDenied

        run = suite.launch(suite.write(RIGHTS))
        for node in ("learner", "actor", "broker", "rogue"):  # the launcher reaches every one
            assert run.handle(node, timeout=30).whoami()[0] == node
        learner = run.handle("learner", timeout=30)
        actor = run.handle("actor", timeout=30)
        rogue = run.handle("rogue", timeout=30)
        # A wired edge works, blocking and with futures.
        assert actor.step() == "learner" and actor.step_futures() == "learner"
        # An unwired call is refused by the callee, promptly, naming both.
        with pytest.raises(PermissionDenied) as denied:
            rogue.reach("learner")
        assert (denied.value.caller, denied.value.callee) == ("rogue", "learner")
        assert "'learner' refused a call from 'rogue'" in str(denied.value)
        with pytest.raises(PermissionDenied, match="refused a call from 'rogue'"):
            rogue.reach("actor", True)
        text, took = rogue.reach_timed("learner")
        assert text.startswith("denied: ") and took < 5, (text, took)
        assert learner.restores() == 0, "a refused call ran"
        # The rogue holds no secret: only its own keys, no right to call anyone.
        holds = rogue.holds()
        assert holds == {"secret": "", "authority": False, "serves": ["rogue"], "calls": []}
        # It cannot take over another node's address, nor serve as it.
        assert "refused to register 'learner'" in rogue.hijack("learner")
        assert "may not serve node 'learner'" in rogue.serve_as("learner")
        # A forged token is refused before a byte of the call is unpickled.
        trace = suite.tmp / "unpickled"
        before = learner.refusals()
        assert rogue.forge("learner", "0" * 64, str(trace)).startswith("denied: ")
        assert not trace.exists(), "a forged call's payload was unpickled"
        assert learner.refusals() > before
        # A handle passed in a call carries its right.
        assert run.handle("broker", timeout=30).introduce()
        assert rogue.use_given() == "restored" and learner.restores() == 1
        assert run.stop(timeout=60) == 0
        suite.assert_nothing_left(run)
