"""A script run with ``--lp_launch_type`` behaves like an absl program: ``--help``, an
unknown flag and a launch type topo does not run end it with a message and no traceback;
a launch says where its logs are; Ctrl-C in a terminal never puts two messages on a line."""

from __future__ import annotations

import os
import re
import signal
import sys
import textwrap
from pathlib import Path

import pexpect
import pytest
from lp_support import HERE, ROOT, run_script

from topo.testing import wait_gone

SCRIPT = '''
    """Consumer and producers: the consumer stops the program after its steps."""
    import topo.launchpad as lp
    from lp_nodes import consumer_producers

    lp.launch(consumer_producers(num_producers=2)).wait()
'''


def _no_run(tmp_path: Path) -> None:
    assert not (tmp_path / "runs").exists()  # the script ended before launching


def test_help_prints_the_flags_and_exits_0(tmp_path: Path) -> None:
    result = run_script(tmp_path, SCRIPT, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: script.py [--lp_launch_type=")
    assert "Consumer and producers: the consumer stops" in result.stdout  # its docstring
    assert "--lp_launch_type: <local_mt|local_mp|test_mt|test_mp>" in result.stdout
    assert "--helpfull" in result.stdout
    _no_run(tmp_path)


def test_an_unknown_flag_is_an_error(tmp_path: Path) -> None:
    result = run_script(tmp_path, SCRIPT, "--lp_launch_type=test_mt", "--num_actors=4")
    assert result.returncode == 1
    assert "FATAL Flags parsing error: Unknown command line flag 'num_actors'" in result.stderr
    assert "launch_type=" in result.stderr  # how a script with flags of its own does it
    assert "Traceback" not in result.stderr
    _no_run(tmp_path)


def test_launchpads_other_flags_and_absl_logging_flags_are_accepted(tmp_path: Path) -> None:
    """Launchpad defines these, and imports absl.logging (--v, --logtostderr)."""
    flags = ["--lp_termination_notice_secs=5", "--nolp_worker_manager_v2", "--v=1"]
    result = run_script(tmp_path, SCRIPT, "--lp_launch_type=test_mt", *flags)
    assert result.returncode == 0, result.stderr
    assert "test_mt on threads: logs in" in result.stderr


@pytest.mark.parametrize("value", ["xm", "vertex_ai"])
def test_a_launch_type_topo_does_not_run_is_an_error(value: str, tmp_path: Path) -> None:
    result = run_script(tmp_path, SCRIPT, f"--lp_launch_type={value}")
    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert first == (
        f"FATAL Flags parsing error: flag --lp_launch_type={value}: value should be one of "
        "<local_mt|local_mp|test_mt|test_mp>"
    )
    assert "backend='ssh' or 'ray'" in result.stderr
    if value == "vertex_ai":
        assert "vertex_ai is a Launchpad launch type that topo does not run" in result.stderr
    assert "Traceback" not in result.stderr
    _no_run(tmp_path)


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp", "test_mp"])
def test_the_run_directory_is_printed(launch_type: str, tmp_path: Path) -> None:
    result = run_script(tmp_path, SCRIPT, f"--lp_launch_type={launch_type}")
    assert result.returncode == 0, result.stderr
    backend = "threads" if launch_type.endswith("_mt") else "procs"
    match = re.search(rf"\| {launch_type} on {backend}: logs in (\S+)$", result.stderr, re.M)
    assert match, result.stderr
    run_dir = Path(match.group(1))
    assert run_dir.parent == tmp_path / "runs"
    assert '"exit_code": 0' in (run_dir / "status.json").read_text()


ABSL_APP = """
    from absl import app, flags
    import topo.launchpad as lp
    from lp_nodes import consumer_producers

    PRODUCERS = flags.DEFINE_integer("producers", 1, "How many producers.")

    def main(argv):
        print("producers:", PRODUCERS.value, "args:", argv[1:], flush=True)
        lp.launch(consumer_producers(num_producers=PRODUCERS.value)).wait()

    if __name__ == "__main__":
        app.run(main)
"""


def test_a_script_with_absl_flags_of_its_own_runs(tmp_path: Path) -> None:
    result = run_script(tmp_path, ABSL_APP, "--producers=3", "--lp_launch_type=test_mt", "x")
    assert result.returncode == 0, result.stderr
    assert "producers: 3 args: ['x']" in result.stdout
    assert "test_mt on threads: logs in" in result.stderr


CTRL_C_SCRIPT = """
    import atexit
    import os
    import topo.launchpad as lp
    from lp_nodes import Echo, block

    program = lp.Program("ctrl_c")
    program.add_node(lp.PyNode(block), label="block")
    program.add_node(lp.CourierNode(Echo), label="echo")
    launched = lp.launch(program)
    launched.run.wait_ready(60)
    atexit.register(lambda: print("pids:", *sorted(launched.run.pids()), flush=True))
    os.write(1, b"ready\\n")  # one write, the script's last: ^C comes in the wait at its end
"""


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
def test_ctrl_c_in_a_terminal_puts_each_message_on_its_own_line(
    launch_type: str, tmp_path: Path
) -> None:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(CTRL_C_SCRIPT))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), env.get("PYTHONPATH", "")])
    child = pexpect.spawn(
        sys.executable,
        [str(script), f"--lp_launch_type={launch_type}"],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=60,
        # As from a shell: a suite started in the background (``cmd &``) ignores SIGINT,
        # and an ignored signal stays ignored across exec.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        child.expect("ready\r\n")
        child.sendintr()
        child.expect(pexpect.EOF)
        out = child.before
    finally:
        child.close(force=True)
    assert child.exitstatus == 130, out
    lines = out.split("\r\n")
    assert "^C" in lines, out  # the terminal's echo ends its line
    messages = [line for line in lines if "topo" in line]
    assert any("| Ctrl-C: stopping the program" in m for m in messages), out
    assert any("| stopping: interrupted (Ctrl-C)" in m for m in messages), out
    for line in messages:  # one message a line, each at its start
        assert line.startswith("topo ") and line.count("topo ") == 1, out
    pids = [int(p) for p in out.split("pids:", 1)[1].split()]
    assert pids and not wait_gone(pids, 15)


def test_topo_backend_runs_the_unchanged_script_elsewhere(tmp_path: Path) -> None:
    """``--topo_backend``: the same script, its launch type's backend replaced."""
    result = run_script(tmp_path, SCRIPT, "--lp_launch_type=local_mt", "--topo_backend=procs")
    assert result.returncode == 0, result.stderr
    match = re.search(r"\| local_mt on procs: logs in (\S+)$", result.stderr, re.M)
    assert match, result.stderr
    status = (Path(match.group(1)) / "status.json").read_text()
    assert '"backend": "procs"' in status and '"exit_code": 0' in status
