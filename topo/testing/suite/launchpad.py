"""Conformance: a Launchpad program (``import topo.launchpad as lp``) runs unchanged on
the backend -- the same IR as a topology file -- constructors pickled with the program
(a lambda) included."""

from __future__ import annotations

from topo.testing.suite.harness import Harness


class Launchpad:
    """``lp.launch(program, backend=...)``."""

    def test_a_launchpad_program_runs_unchanged(self, suite: Harness) -> None:
        import topo.launchpad as lp
        from topo.testing import nodes

        program = lp.Program("lp_suite")
        with program.group("echo"):
            handles = [program.add_node(lp.CourierNode(nodes.Echo)) for _ in range(2)]
        # A lambda cannot be imported by name: it travels cloudpickled in the program.
        made = program.add_node(lp.CourierNode(lambda: nodes.Echo()), label="made here")
        launched = lp.launch(
            program,
            backend=suite.ut.name,
            backend_options=dict(suite.ut.options) or None,
            log_dir=str(suite.tmp / "runs"),
        )
        run = launched.run
        try:
            assert launched.program.node("made_here").factory is not None
            who = [h.dereference().whoami() for h in handles if h is not None]
            assert [w[0] for w in who] == ["echo/0", "echo/1"]
            assert made is not None and made.dereference().whoami()[0] == "made_here"
            pids = suite.node_pids(run)
        finally:
            assert launched.stop(timeout=60) == 0
        suite.assert_nothing_left(run, pids)
