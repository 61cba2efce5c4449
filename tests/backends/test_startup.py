"""Start-up as the user feels it: the procs backend's fork server starts (and imports)
while the file is compiled, ``topo run`` imports only what it needs, and a file that does
not compile leaves no process behind. Real processes, checked by pid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from topo.api import RunningProgram, launch, prepare
from topo.backends.procs import ProcsBackend
from topo.backends.proctree import child_pids
from topo.cli.early import RUN_BACKEND, EarlyBackend, named_backend
from topo.testing import wait_gone, wait_until

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ECHO = "name: warm\nnodes:\n  echo: {target: 'bk_nodes:Echo'}\n"

# Modules the launcher of `topo run -b procs` has no use for (the nodes, in the fork
# server, import what they need).
NOT_IMPORTED = ("numpy", "jax", "tensorflow", "matplotlib", "jsonschema", "asyncssh", "ray")

# Runs the `topo` command in this process and prints the modules it imported at exit.
IMPORTED = """
import atexit, sys
atexit.register(lambda: print("MODULES", *sorted(sys.modules)))
sys.argv = ["topo", *sys.argv[1:]]
from topo.cli import main
main()
"""

# Runs a command as a child subreaper: whatever it leaves behind is re-parented here, and
# is reported (then killed, by pid).
ORPHANS = """
import ctypes, json, os, signal, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
kids = []
for tid in os.listdir(f"/proc/{os.getpid()}/task"):
    with open(f"/proc/{os.getpid()}/task/{tid}/children") as f:
        kids += [int(p) for p in f.read().split()]
left = []
for pid in kids:
    with open(f"/proc/{pid}/stat") as f:
        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
            left.append(pid)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
print(json.dumps({"code": done.returncode, "stderr": done.stderr, "left": left}))
"""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]), NO_COLOR="1")


def _run_reaped(cmd: list[str], cwd: Path) -> dict[str, Any]:
    """Run ``cmd`` under the ``ORPHANS`` subreaper: its exit code, stderr and left pids."""
    out = subprocess.run(
        [sys.executable, "-c", ORPHANS, *cmd],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=cwd,
        timeout=60,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_warm_up_starts_the_fork_server_and_close_ends_it() -> None:
    backend = ProcsBackend()
    assert backend.warm_up()
    pid = backend.server_pid
    assert pid is not None
    # none between its fork and its exec
    wait_until(lambda: psutil.Process(pid).cmdline(), 10, what="its command line", every=0.01)
    title = " ".join(psutil.Process(pid).cmdline()).strip()  # its command, or the title it set
    assert "topo.backends.forkserver" in title or title == "topo: fork server"
    backend.close()  # the run never opened
    assert not wait_gone([pid], 10)
    assert pid not in child_pids()  # reaped, not left a zombie


def test_bad_file_leaves_no_fork_server_behind(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nnodes:\n  echo:\n    target: 'bk_nodes:Echo'\n    count: many\n")
    cmd = [sys.executable, "-m", "topo", "run", str(bad)]  # the fork server starts first
    result = _run_reaped([*cmd, "-b", "procs", "--log-dir", str(tmp_path)], tmp_path)
    assert result["code"] == 1, result["stderr"]
    assert f"{bad}:5:" in result["stderr"] and "Traceback" not in result["stderr"]
    assert result["left"] == []
    assert not (tmp_path / "runs").exists()


def test_unknown_target_module_leaves_no_fork_server_behind(tmp_path: Path) -> None:
    """The launcher's checks refuse the program after the warm-up started the server."""
    path = tmp_path / "missing.yaml"
    path.write_text("name: missing\nnodes:\n  a: {target: 'no_such_module_here:Thing'}\n")
    cmd = [sys.executable, "-c", "from topo.cli import main; main()", "run", str(path)]
    result = _run_reaped([*cmd, "--log-dir", str(tmp_path)], tmp_path)
    assert result["code"] == 1 and "no_such_module_here" in result["stderr"], result
    assert f"{path}:3:" in result["stderr"]
    assert result["left"] == []


@pytest.mark.parametrize(
    "options",
    [["--hosts", "inventory.yaml"], ["-b", "threads"], ["--no-such-option"], ["--help"]],
)
def test_command_that_does_not_run_on_procs_leaves_no_fork_server_behind(
    tmp_path: Path, options: list[str]
) -> None:
    """``topo run`` on procs starts the fork server before it parses its options: a usage
    error, another backend or ``--help`` end it."""
    path = tmp_path / "hello.yaml"
    path.write_text("name: hello\nnodes:\n  hi: {kind: py, target: 'bk_nodes:hello'}\n")
    cmd = [sys.executable, "-m", "topo", "run", str(path), "--no-live", *options]
    result = _run_reaped([*cmd], tmp_path)
    assert result["code"] == (0 if options[0] in ("-b", "--help") else 2), result
    assert result["left"] == []


@pytest.mark.parametrize(
    ("args", "backend"),
    [
        (["f.yaml"], "procs"),
        (["f.yaml", "-b", "threads"], "threads"),
        (["--backend=ssh", "f.yaml"], "ssh"),
        (["-bray", "f.yaml"], "ray"),
        (["f.yaml", "-b", "threads", "--backend", "procs"], "procs"),
        (["f.yaml", "--", "-b", "threads"], "procs"),
    ],
)
def test_named_backend_reads_the_command_line(args: list[str], backend: str) -> None:
    """The one reading of ``--backend``: the early warm-up and ``topo run``/``plan``."""
    assert named_backend(args) == backend == named_backend(args, RUN_BACKEND)
    assert named_backend(["f.yaml"], None) is None


def test_a_run_takes_the_backend_warmed_early_and_ends_one_of_another_name(
    tmp_path: Path,
) -> None:
    """``topo run`` on procs starts the fork server before its command line is parsed
    (``topo.command`` hands it over as an ``EarlyBackend``); the run takes that backend,
    or ends it at once if the run is on another backend or with options of its own."""
    path = tmp_path / "warm.yaml"
    path.write_text(ECHO)
    early = ProcsBackend()
    handed = EarlyBackend(early)
    pid = early.server_pid
    taken = handed.take("procs", {})
    assert taken is early
    launcher = prepare(path, taken, log_dir=tmp_path / "runs")
    assert launcher.backend is early and early.server_pid == pid
    handed.close()  # taken: not closed by the console script
    assert pid is not None and psutil.pid_exists(pid)
    early.close()  # the run never starts
    assert not wait_gone([pid], 10)
    for name, options in (("threads", {}), ("procs", {"python": "python3"})):
        other = ProcsBackend()
        handed = EarlyBackend(other)
        pid = other.server_pid
        assert handed.take(name, options) is None
        assert pid is not None and not wait_gone([pid], 10)
        handed.close()  # nothing left to close: no error


def test_topo_run_imports_only_what_it_needs(tmp_path: Path) -> None:
    path = tmp_path / "hello.yaml"
    path.write_text("name: hello\nnodes:\n  hi: {kind: py, target: 'bk_nodes:hello'}\n")
    result = subprocess.run(
        [sys.executable, "-c", IMPORTED, "run", str(path), "-b", "procs", "--no-live"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=90,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("MODULES ")]
    imported = set(line.split()[1:])
    assert "topo.backends.procs" in imported  # it did run
    wrong = sorted(m for m in imported if m.split(".")[0] in NOT_IMPORTED)
    assert not wrong, f"topo run imported {wrong}"


def test_environment_changed_after_the_warm_up_starts_a_new_server(
    topo_launch: Callable[..., RunningProgram], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = ProcsBackend()
    backend.warm_up()
    first = backend.server_pid
    monkeypatch.setenv("TOPO_WARM_TEST", "set after the warm-up")
    path = tmp_path / "warm.yaml"
    path.write_text(ECHO)
    run = topo_launch(path, backend=backend, ready_timeout=60)
    assert run.handle("echo").env("TOPO_WARM_TEST") == "set after the warm-up"
    assert backend.server_pid != first
    assert first is not None and not wait_gone([first], 10)


def test_warm_server_imports_targets_found_beside_the_file(
    topo_launch: Callable[..., RunningProgram], tmp_path: Path
) -> None:
    """The server started before the compile put the folder above the file on the import
    path: it gets that path with the program, and so do the nodes' own subprocesses."""
    package = tmp_path / "project" / "warm_beside_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "nodes.py").write_text("from bk_nodes import Echo\n")
    topology = tmp_path / "project" / "topologies" / "beside.yaml"
    topology.parent.mkdir()
    topology.write_text("name: beside\nnodes:\n  echo: {target: 'warm_beside_pkg.nodes:Echo'}\n")
    run = topo_launch(topology, backend="procs", ready_timeout=60)
    echo = run.handle("echo")
    assert echo.ping() == "pong"
    assert str(tmp_path / "project") in (echo.env("PYTHONPATH") or "").split(os.pathsep)


def test_what_the_server_wrote_before_the_run_directory_existed_is_in_its_log(
    topo_launch: Callable[..., RunningProgram], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # -X importtime for the server only (the environment is read when an interpreter
    # starts): it writes a line for every module it imports while warming up.
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    path = tmp_path / "warm.yaml"
    path.write_text(ECHO)
    run = topo_launch(path, backend="procs", ready_timeout=60)
    log = (run.run_dir / "forkserver.log").read_text()
    assert "| topo.backends.child" in log  # imported during the warm-up
    assert "bk_nodes" in log  # imported once the program was known


def test_a_fork_server_that_dies_while_warming_up_leaves_its_output_in_the_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server imports from the current directory first: a broken module there kills it
    # before it has the program (and so before it knows the run directory).
    (tmp_path / "multiprocess.py").write_text("raise RuntimeError('broken for the test')\n")
    monkeypatch.chdir(tmp_path)
    # The launcher puts its directory on sys.path: not for the fork servers of later tests.
    monkeypatch.setattr(sys, "path", list(sys.path))
    path = tmp_path / "warm.yaml"
    path.write_text(ECHO)
    run = launch(path, backend="procs", log_dir=tmp_path / "runs")
    try:
        assert run.wait(60) == 1
        failure = run.failure
        assert failure is not None and "the fork server (pid" in failure.message
        assert "before it was ready" in failure.message
        assert "broken for the test" in (run.run_dir / "forkserver.log").read_text()
    finally:
        run.stop(timeout=30)
        assert not wait_gone(run.pids(), 15)


def test_the_run_directory_is_handed_over_before_any_node_starts(tmp_path: Path) -> None:
    """``topo run --ui`` gives its dashboard the run directory through ``opened``: it
    comes before the nodes start (and take the CPU), with the program already in it."""
    path = tmp_path / "handed.yaml"
    path.write_text(ECHO)
    launcher = prepare(path, "procs", log_dir=tmp_path / "runs")
    order: list[str] = []
    launcher.add_listener(lambda event: order.append(event.kind))

    def opened(run_dir: Path) -> None:
        order.append("opened")
        assert (run_dir / "program.json").exists() and (run_dir / "status.json").exists()

    launcher.start(opened)
    running = RunningProgram(launcher)
    try:
        assert running.wait_ready(60)
    finally:
        running.stop()
    assert running.wait(60) == 0
    assert order.index("opened") == 0 < order.index("starting") < order.index("ready")
    assert not wait_gone(running.pids(), 20)
