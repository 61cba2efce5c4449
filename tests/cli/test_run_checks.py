"""``topo run`` imports the targets and binds every node's arguments before it starts
anything: a misspelled argument is a ``file:line:col`` error (exit 1), every one at once,
with no traceback and no process left behind (the procs fork server, started before the
command line was read, included). On procs the fork server does the importing (it needs
the targets anyway), so the launcher does not pay for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from topo.compile import compile_spec
from topo.compile.checks import check_imports
from topo.diagnostics import TopoError
from topo.loader import load_spec

ROOT = Path(__file__).resolve().parents[2]
NODES = """
import topo


class Worker:
    def __init__(self, count: int, name: str = "w") -> None:
        self.count = count

    def run(self) -> None:
        topo.wait_for_stop()
"""
TOPOLOGY = """\
name: misspelled
nodes:
  worker:
    target: rc_nodes:Worker
    count: 2
    args:
      count: 3
      nmae: first
  other:
    target: rc_nodes:Worker
    args:
      cuont: 1
"""

# Runs `topo` in this interpreter as its own subreaper (a process left behind by the run
# comes back to it), noting the fork server topo.command starts early, then prints what
# is left: its live children and whether the fork server still exists.
DRIVER = """
import ctypes, json, os, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
import topo.cli.early
servers = []
warm = topo.cli.early.EarlyBackend.__init__
def noting(self, backend):
    warm(self, backend)
    servers.append(backend.server_pid)
topo.cli.early.EarlyBackend.__init__ = noting
sys.argv[1:] = {argv!r}
from topo.command import main
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code
from topo.backends.proctree import child_pids
from topo.testing import wait_until
def running():  # the children still running (those that ended are reaped)
    left = []
    for pid in child_pids(recursive=True):
        try:
            if os.waitpid(pid, os.WNOHANG) == (0, 0):
                left.append(pid)
        except ChildProcessError:
            pass
    return left
try:  # what was killed at the end has ended and is reaped
    wait_until(lambda: not running(), 10)
except AssertionError:
    pass
alive = running()
gone = [not os.path.exists(f"/proc/{{pid}}") for pid in servers]
imported = "rc_nodes" in sys.modules  # by the launcher itself
print(json.dumps({{"code": code, "left": alive, "servers": servers, "gone": gone,
                  "imported": imported}}))
"""


def _run(tmp_path: Path, *argv: str) -> tuple[dict[str, object], str]:
    """``topo run ARGV`` through ``DRIVER``: its report, and what topo printed."""
    code = DRIVER.format(argv=["run", *argv, "--log-dir", str(tmp_path / "runs")])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]), NO_COLOR="1")
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env=env,
    )
    *out, last = done.stdout.strip().splitlines()
    return json.loads(last), "\n".join(out) + "\n" + done.stderr


@pytest.fixture
def topology(tmp_path: Path) -> Path:
    (tmp_path / "rc_nodes.py").write_text(textwrap.dedent(NODES), encoding="utf-8")
    path = tmp_path / "misspelled.yaml"
    path.write_text(TOPOLOGY, encoding="utf-8")
    return path


@pytest.mark.parametrize("backend", ["procs", "threads", "ray"])
def test_a_misspelled_argument_stops_the_run_before_it_starts(
    tmp_path: Path, topology: Path, backend: str
) -> None:
    report, err = _run(tmp_path, str(topology), "-b", backend, "--no-live")
    assert report["code"] == 1, err
    assert f"{topology}:8:7: error: group 'worker': rc_nodes:Worker takes no argument 'nmae'" in err
    assert (
        f"{topology}:12:7: error: group 'other': rc_nodes:Worker takes no argument 'cuont'" in err
    )
    assert "needs the argument 'count'" in err  # `other` gives none: every error at once
    assert "Traceback" not in err and "worker.py" not in err
    assert report["left"] == [], report
    if backend == "procs":  # the fork server was started early, and is gone
        assert len(report["servers"]) == 1 and report["gone"] == [True], report
    # procs: the fork server imported the targets (it does anyway), not the launcher;
    # threads: the nodes run in the launcher, which imports them anyway; ray: checked
    # here, before Ray is started or reached
    assert report["imported"] is (backend != "procs"), report
    assert not (tmp_path / "runs").exists()  # not even a run directory


@pytest.mark.slow
def test_a_correct_topology_still_runs(tmp_path: Path, topology: Path) -> None:
    topology.write_text(
        TOPOLOGY.replace("nmae", "name").replace("cuont", "count") + "stop: {timeout_s: 1}\n",
        encoding="utf-8",
    )
    report, err = _run(tmp_path, str(topology), "--no-live", "--grace", "1")
    assert report["code"] == 0, err
    assert "all 3 nodes up" in err and "killed" not in err, err
    assert report["left"] == [] and report["gone"] == [True], report


def test_targets_that_only_import_elsewhere_are_left_to_that_backend(
    tmp_path: Path, topology: Path
) -> None:
    """ssh and ray run nodes in other environments: a target that does not import here is
    not an error there (their own host check imports it), but the signatures of those that
    do import are still checked."""
    (tmp_path / "rc_remote.py").write_text("import no_such_package_here\n", encoding="utf-8")
    topology.write_text(
        TOPOLOGY.replace(
            "rc_nodes:Worker\n    args:\n      cuont", "rc_remote:W\n    args:\n      cuont"
        ),
        encoding="utf-8",
    )
    sys.path.insert(0, str(tmp_path))
    try:
        loaded = load_spec(topology)
        program = compile_spec(loaded)
        with pytest.raises(TopoError) as strict:
            check_imports(program, loaded)
        messages = [d.message for d in strict.value.diagnostics]
        assert any("rc_remote:W" in m and "no_such_package_here" in m for m in messages)
        with pytest.raises(TopoError) as lenient:
            check_imports(program, loaded, imports_here=False)
        messages = [d.message for d in lenient.value.diagnostics]
        assert messages == ["group 'worker': rc_nodes:Worker takes no argument 'nmae'"]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("rc_nodes", None)


@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_a_target_that_raises_on_import_is_named_with_where_it_raised(
    tmp_path: Path, topology: Path, backend: str
) -> None:
    (tmp_path / "rc_boom.py").write_text("x = 1\nraise RuntimeError('boom')\n", encoding="utf-8")
    topology.write_text(TOPOLOGY.replace("rc_nodes:Worker\n    args:\n      cuont: 1", "rc_boom:X"))
    report, err = _run(tmp_path, str(topology), "-b", backend, "--no-live")
    assert report["code"] == 1 and report["left"] == [], (report, err)
    raised = f"raised RuntimeError: boom (at {tmp_path}/rc_boom.py:2)"
    said = f"group 'other': importing 'rc_boom:X' {raised}"
    assert f"{topology}:10:13: error: {said}" in err, err
    assert "takes no argument 'nmae'" in err and "Traceback" not in err
