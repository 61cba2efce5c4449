"""Launch types: test_* launches stopped by the test case's cleanup, local_* launches that
keep the script alive until the program stops, the --lp_launch_type flag, per-label env."""

from __future__ import annotations

import signal
import threading
import time
import unittest
from pathlib import Path

import pytest
from lp_nodes import Echo, block, consumer_producers, fail
from lp_support import Launch, run_script, start_script

import topo.launchpad as lp
from topo.testing import alive, wait_gone


class CleanupTest(unittest.TestCase):
    """Launchpad's own pattern: ``lp.launch(..., test_case=self)`` in a TestCase."""

    __test__ = False  # run by the test below, not collected by pytest
    launch_type = "test_mt"
    log_dir = "runs"
    launched: lp.Launched | None = None

    def test_launch_with_cleanup(self) -> None:
        program = lp.Program("cleanup")
        program.add_node(lp.PyNode(block), label="block")
        echo = program.add_node(lp.CourierNode(Echo), label="echo")
        CleanupTest.launched = lp.launch(
            program, self.launch_type, test_case=self, log_dir=self.log_dir
        )
        assert echo is not None
        self.assertEqual(echo.dereference().ping(), "pong")
        self.assertIsNone(CleanupTest.launched.run.exit_code)


@pytest.mark.parametrize("launch_type", ["test_mt", "test_mp"])
def test_test_case_cleanup_stops_the_program(launch_type: str, tmp_path: Path) -> None:
    CleanupTest.launch_type, CleanupTest.log_dir = launch_type, str(tmp_path)
    result = unittest.TestResult()
    CleanupTest("test_launch_with_cleanup").run(result)
    assert result.wasSuccessful(), result.errors + result.failures
    launched = CleanupTest.launched
    assert launched is not None
    assert launched.run.exit_code == 0  # the cleanup stopped it cleanly
    assert not wait_gone(launched.run.pids(), 15)
    if launch_type == "test_mp":
        assert len(launched.run.pids()) >= 2  # processes were started, and are gone


class FailureTest(unittest.TestCase):
    """A node fails while the test body does not wait: the cleanup fails the test."""

    __test__ = False  # run by the test below, not collected by pytest
    launch_type = "test_mt"
    log_dir = "runs"

    def test_failure_surfaces_in_cleanup(self) -> None:
        program = lp.Program("cleanup_failure")
        program.add_node(lp.PyNode(block), label="block")
        program.add_node(lp.PyNode(fail, "broken in the background"), label="fail")
        launched = lp.launch(program, self.launch_type, test_case=self, log_dir=self.log_dir)
        launched.run.wait(60)  # the failure ends the run; the test body goes on


@pytest.mark.parametrize("launch_type", ["test_mt", "test_mp"])
def test_test_case_cleanup_reports_a_node_failure(launch_type: str, tmp_path: Path) -> None:
    FailureTest.launch_type, FailureTest.log_dir = launch_type, str(tmp_path)
    result = unittest.TestResult()
    FailureTest("test_failure_surfaces_in_cleanup").run(result)
    assert len(result.errors) == 1
    assert "ValueError: broken in the background" in result.errors[0][1]


LOCAL_SCRIPT = """
    import atexit, os, sys, time
    import topo.launchpad as lp
    from lp_nodes import Echo, block, stop_after

    program = lp.Program("local")
    program.add_node(lp.PyNode(block), label="block")
    program.add_node(lp.CourierNode(Echo), label="echo")
    program.add_node(lp.PyNode(stop_after, 0.5), label="stopper")
    launched = lp.launch(program, launch_type=sys.argv[1] if len(sys.argv) > 1 else None)
    # runs after lp.launch's wait at exit: every process the run started
    atexit.register(lambda: print("pids:", *sorted(launched.run.pids()), flush=True))
    print("backend:", launched.run.launcher.backend.name, flush=True)
    # the script's end: lp.launch waits here until the program stops
"""


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
def test_local_launch_waits_until_a_node_stops_the_program(
    launch_type: str, tmp_path: Path
) -> None:
    result = run_script(tmp_path, LOCAL_SCRIPT, launch_type)
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    assert lines["backend"].strip() == ("threads" if launch_type == "local_mt" else "procs")
    pids = [int(p) for p in lines["pids"].split()]
    assert not alive(pids)
    if launch_type == "local_mp":
        assert len(pids) >= 4  # three nodes and the fork server
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if not p.is_symlink()]
    assert '"exit_code": 0' in (run_dir / "status.json").read_text()


def test_launch_type_flag_is_used_when_none_is_given(tmp_path: Path) -> None:
    script = LOCAL_SCRIPT.replace("sys.argv[1] if len(sys.argv) > 1 else None", "None")
    result = run_script(tmp_path, script, "--lp_launch_type=test_mp")
    assert result.returncode == 0, result.stderr
    assert "backend: procs" in result.stdout
    pids = [int(p) for p in result.stdout.split("pids:", 1)[1].splitlines()[0].split()]
    assert pids  # at least the fork server; a test launch is not waited for at exit,
    assert not wait_gone(pids, 15)  # but its processes do not outlive the script


def test_consumer_steps(lp_launch: Launch) -> None:
    """Launchpad's consumer/producers launch test: the consumer, its run() disabled,
    takes 10 steps driven from the test."""
    program = consumer_producers(num_producers=2)
    (consumer_node,) = program.groups["consumer"]
    consumer_node.disable_run()
    lp_launch(program)
    consumer = consumer_node.create_handle().dereference()
    for _ in range(10):
        assert consumer.step() == [0, 1]


def test_consumer_producers_stops_by_itself(lp_launch: Launch) -> None:
    launched = lp_launch(consumer_producers(num_producers=3))
    assert launched.wait(timeout=60) == 0


def test_python_process_env_reaches_the_node(lp_launch: Launch, launch_type: str) -> None:
    program = lp.Program("env")
    with program.group("learner"):
        learner = program.add_node(lp.CourierNode(Echo))
    other = program.add_node(lp.CourierNode(Echo), label="other")
    resources = {"learner": lp.PythonProcess(env={"TOPO_LP_TEST": "on-learner"})}
    lp_launch(program, local_resources=resources)
    assert learner is not None and other is not None
    if launch_type == "test_mt":  # threads share the launcher's environment: ignored
        assert learner.dereference().env("TOPO_LP_TEST") is None
        return
    assert learner.dereference().env("TOPO_LP_TEST") == "on-learner"
    assert other.dereference().env("TOPO_LP_TEST") is None


def test_local_resources_must_name_a_group(lp_launch: Launch) -> None:
    program = lp.Program("env")
    program.add_node(lp.CourierNode(Echo), label="learner")
    with pytest.raises(lp.ProgramError, match="'actor', which is not a group"):
        lp_launch(program, local_resources={"actor": lp.PythonProcess()})


def test_serialize_py_nodes_false_gives_thread_nodes_the_objects(
    lp_launch: Launch, launch_type: str
) -> None:
    """Launchpad's colocation tests share Events with thread nodes this way."""
    has_ping = threading.Event()
    seen: list[str] = []

    def server() -> None:
        seen.append("served")
        has_ping.set()
        lp.wait_for_stop()

    program = lp.Program("unserialized")
    program.add_node(lp.MultiThreadingColocation([lp.PyNode(server), lp.PyNode(block)]), "c")
    if launch_type == "test_mp":  # processes need pickled nodes; the error says which
        with pytest.raises(lp.ProgramError, match=r"node c/0 \(PyNode\(.*server\)\)"):
            lp_launch(program, serialize_py_nodes=False)
        return
    with pytest.raises(lp.ProgramError, match="serialize_py_nodes=False"):
        lp_launch(program)  # the default pickles, and says how to avoid it
    launched = lp_launch(program, serialize_py_nodes=False)
    assert has_ping.wait(30)
    assert seen == ["served"]  # the very list of the test
    assert launched.live_objects


CTRL_C_SCRIPT = """
    import atexit, signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    import topo.launchpad as lp
    from lp_nodes import Echo, block

    program = lp.Program("ctrl_c")
    program.add_node(lp.PyNode(block), label="block")
    program.add_node(lp.CourierNode(Echo), label="echo")
    launched = lp.launch(program, launch_type=sys.argv[1])
    launched.run.wait_ready(60)
    atexit.register(lambda: print("pids:", *sorted(launched.run.pids()), flush=True))
    print("ready", flush=True)
    if sys.argv[2] == "busy":  # Ctrl-C while the script still runs, not at its end
        import time
        time.sleep(120)
"""


@pytest.mark.parametrize("when", ["at_exit", "busy"])
@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
def test_ctrl_c_stops_a_local_launch(launch_type: str, when: str, tmp_path: Path) -> None:
    proc = start_script(tmp_path, CTRL_C_SCRIPT, launch_type, when)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # no event: the script reaches its end (or its sleep) meanwhile
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if when == "at_exit":
        assert proc.returncode == 130, err  # as after Ctrl-C of `topo run`
    else:  # the script itself was interrupted
        assert "KeyboardInterrupt" in err
    pids = [int(p) for p in out.split("pids:", 1)[1].split()]
    assert not wait_gone(pids, 15)


def test_the_flag_wins_over_the_environment(tmp_path: Path) -> None:
    script = """
        import os
        os.environ["TOPO_LP_LAUNCH_TYPE"] = "local_mp"
        from topo.launchpad.flags import launch_type_flag
        print("type:", launch_type_flag())
    """
    assert "type: local_mt" in run_script(tmp_path, script, "--lp_launch_type=local_mt").stdout
    assert "type: local_mp" in run_script(tmp_path, script).stdout


FAILING_SCRIPT = """
    import atexit, sys
    import topo.launchpad as lp
    from lp_nodes import block, fail

    program = lp.Program("failing")
    program.add_node(lp.PyNode(block), label="block")
    program.add_node(lp.PyNode(fail, "it broke"), label="fail")
    launched = lp.launch(program, launch_type=sys.argv[1])
    atexit.register(lambda: print("pids:", *sorted(launched.run.pids()), flush=True))
"""


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
def test_a_failed_local_launch_reports_and_exits_1(launch_type: str, tmp_path: Path) -> None:
    result = run_script(tmp_path, FAILING_SCRIPT, launch_type)
    assert result.returncode == 1
    assert "lp.launch: program 'failing' failed -- node fail failed" in result.stderr
    assert "ValueError: it broke" in result.stderr
    pids = [int(p) for p in result.stdout.split("pids:", 1)[1].split()]
    assert not wait_gone(pids, 15)
