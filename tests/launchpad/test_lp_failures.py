"""A node failure reaches a unittest TestCase once: ``wait()`` raises it with the node's
own type and message, and the ``test_case`` cleanup does not raise it again (a failure
nobody received still fails the test from the cleanup)."""

from __future__ import annotations

import unittest
from pathlib import Path

import pytest
from lp_nodes import NodeError, block, fail_as, fail_custom
from lp_support import run_script

import topo.launchpad as lp
from topo.testing import wait_gone


class CaughtOnce(unittest.TestCase):
    """Launchpad's colocation test: a node raises, ``wait()`` delivers it to the test."""

    __test__ = False  # run by the tests below, not collected by pytest
    launch_type = "test_mt"
    log_dir = "runs"
    caught: BaseException | None = None
    launched: list[lp.Launched] = []

    def test_exception_propagation(self) -> None:
        program = lp.Program("caught")
        error_node = lp.PyNode(fail_as, "RuntimeError", "Foo")
        program.add_node(lp.MultiThreadingColocation([error_node, lp.PyNode(block)]), "coloc")
        with self.assertRaisesRegex(RuntimeError, "^Foo$") as caught:
            launched = lp.launch(
                program, launch_type=self.launch_type, test_case=self, log_dir=self.log_dir
            )
            CaughtOnce.launched.append(launched)
            launched.wait()
        CaughtOnce.caught = caught.exception

    def test_caught_then_waited_again(self) -> None:
        program = lp.Program("again")
        program.add_node(lp.PyNode(fail_as, "KeyError", "missing setting"), label="broken")
        launched = lp.launch(
            program, launch_type=self.launch_type, test_case=self, log_dir=self.log_dir
        )
        CaughtOnce.launched.append(launched)
        with self.assertRaises(KeyError) as caught:
            launched.wait()
        self.assertEqual(caught.exception.args, ("missing setting",))
        self.assertEqual(launched.wait(), 1)  # delivered once, as Launchpad does

    def test_never_received(self) -> None:
        program = lp.Program("unreceived")
        program.add_node(lp.PyNode(fail_as, "RuntimeError", "Foo"), label="broken")
        launched = lp.launch(
            program, launch_type=self.launch_type, test_case=self, log_dir=self.log_dir
        )
        CaughtOnce.launched.append(launched)
        self.assertEqual(launched.wait(raise_error=False), 1)  # not delivered: cleanup does


def _run(name: str, launch_type: str, tmp_path: Path) -> unittest.TestResult:
    CaughtOnce.launch_type, CaughtOnce.log_dir = launch_type, str(tmp_path)
    CaughtOnce.caught, CaughtOnce.launched = None, []
    result = unittest.TestResult()
    CaughtOnce(name).run(result)
    for launched in CaughtOnce.launched:
        assert launched.run.exit_code == 1
        assert not wait_gone(launched.run.pids(), 15)
    return result


@pytest.mark.parametrize("launch_type", ["test_mt", "test_mp"])
def test_a_failure_caught_from_wait_passes_the_test(launch_type: str, tmp_path: Path) -> None:
    result = _run("test_exception_propagation", launch_type, tmp_path)
    assert result.wasSuccessful(), result.errors + result.failures
    assert result.testsRun == 1
    exc = CaughtOnce.caught
    assert type(exc) is RuntimeError and str(exc) == "Foo"  # Launchpad's type and text
    assert getattr(exc, "node_id", None) == "coloc/0"
    assert not getattr(exc, "__notes__", None)  # pytest's match= would read a note
    cause = exc.__cause__
    assert isinstance(cause, lp.NodeFailure) and "in fail_as" in cause.traceback


@pytest.mark.parametrize("launch_type", ["test_mt", "test_mp"])
def test_a_failure_is_delivered_once(launch_type: str, tmp_path: Path) -> None:
    result = _run("test_caught_then_waited_again", launch_type, tmp_path)
    assert result.wasSuccessful(), result.errors + result.failures


@pytest.mark.parametrize("launch_type", ["test_mt", "test_mp"])
def test_a_failure_never_received_fails_the_test_in_cleanup(
    launch_type: str, tmp_path: Path
) -> None:
    result = _run("test_never_received", launch_type, tmp_path)
    assert len(result.errors) == 1 and not result.failures
    text = result.errors[0][1]
    assert "RuntimeError: Foo" in text and "node broken" in text


def test_a_user_exception_type_is_kept(tmp_path: Path) -> None:
    program = lp.Program("custom")
    program.add_node(lp.PyNode(fail_custom), label="custom")
    launched = lp.launch(program, launch_type="test_mp", log_dir=str(tmp_path))
    try:
        with pytest.raises(NodeError, match=r"^custom failure$") as info:
            launched.wait(timeout=60)
        assert getattr(info.value, "node_id", None) == "custom"
    finally:
        launched.stop(timeout=60)
    assert not wait_gone(launched.run.pids(), 15)


ABSL_STYLE_TEST = """
    import sys, unittest
    import topo.launchpad as lp
    from lp_nodes import block, fail_as

    class ColocationTest(unittest.TestCase):
        def test_exception_propagation(self):
            program = lp.Program("caught")
            node = lp.MultiThreadingColocation(
                [lp.PyNode(fail_as, "RuntimeError", "Foo"), lp.PyNode(block)])
            program.add_node(node, label="coloc")
            with self.assertRaisesRegex(RuntimeError, "Foo"):
                lp.launch(program, launch_type=sys.argv[1], test_case=self).wait()

    if __name__ == "__main__":
        unittest.main(argv=sys.argv[:1])
"""


@pytest.mark.parametrize("launch_type", ["test_mt", "test_mp"])
def test_a_test_module_run_by_unittest_passes(launch_type: str, tmp_path: Path) -> None:
    """The user's test file as they run it: ``python test.py`` exits 0, one test, OK."""
    result = run_script(tmp_path, ABSL_STYLE_TEST, launch_type)
    assert result.returncode == 0, result.stderr
    assert "Ran 1 test" in result.stderr and "\nOK" in result.stderr
