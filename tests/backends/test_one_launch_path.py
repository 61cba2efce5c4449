"""``topo run``, ``topo.launch`` and ``lp.launch`` prepare a run one way
(``topo.api.prepare``): the backend, chosen by name with its options, warms up (procs:
its fork server starts) while the program is compiled, and when the program turns out
bad the warmed backend is closed, leaving no process behind.

Each front end runs in a fresh interpreter on ``journal``, a procs backend installed as
a plug-in that writes down its fork server's pid when it warms up and when it is closed;
the interpreter checks that pid itself after the failure, before it exits (the server
would end with its parent anyway)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bk_plugins import install

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# A topology whose target does not import: the launcher's check refuses it, after the
# file compiled (the last step of preparing a run).
MISSING = "name: missing\nnodes:\n  a: {target: 'no_such_module_here:Thing'}\n"

FRONT_END = """
import json, sys, threading
from pathlib import Path
import psutil

mode, journal, path, runs, good = sys.argv[1:]
failure = None
try:
    if mode == "topo run":
        from topo.command import main
        sys.argv = ["topo", "run", path, "-b", "journal", "--journal", journal,
                    "--log-dir", runs, "--no-live"]
        main()
    elif mode == "topo.launch":
        import topo
        topo.launch(path, "journal", backend_options={"journal": journal}, log_dir=runs)
    else:
        import topo.launchpad as lp
        from bk_nodes import Echo
        program = lp.Program("locked")
        args = () if good == "good" else (threading.Lock(),)
        program.add_node(lp.CourierNode(Echo, *args), label="locked")
        lp.launch(program, launch_type="test_mp", backend="journal",
                  backend_options={"journal": journal}, log_dir=runs)
except SystemExit as exc:
    failure = f"exit {exc.code}"
except Exception as exc:
    failure = f"{type(exc).__name__}: {exc}"
lines = Path(journal).read_text().split()
pid = int(lines[1])
alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
print(json.dumps({"failure": failure, "journal": lines, "alive": alive}))
"""


def _run_front_end(
    tmp_path: Path, front_end: str, path: Path, runs: Path, program: str
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """Run FRONT_END in a fresh interpreter with the ``journal`` plug-in installed; check
    that the warmed fork server was closed and is gone, and return what it reported."""
    journal = tmp_path / "journal"
    site = install(tmp_path / "site")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE), str(site)]))
    done = subprocess.run(
        [sys.executable, "-c", FRONT_END, front_end, str(journal), str(path), str(runs), program],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    pid = result["journal"][1]
    assert not result["alive"], f"{front_end} left the fork server {pid} running"
    assert result["journal"] == ["warm", pid, "closed"]  # warmed (a server), then closed
    return done, result


@pytest.mark.parametrize(
    ("front_end", "failure"),
    [
        ("topo run", "exit 1"),
        ("topo.launch", "TopoError: "),
        ("lp.launch", "ProgramError: "),
    ],
)
def test_a_bad_program_closes_the_warmed_backend_on_every_front_end(
    tmp_path: Path, front_end: str, failure: str
) -> None:
    path, runs = tmp_path / "missing.yaml", tmp_path / "runs"
    path.write_text(MISSING)
    done, result = _run_front_end(tmp_path, front_end, path, runs, "bad")
    assert result["failure"].startswith(failure), result
    if front_end == "lp.launch":  # named at the add_node call of the script
        assert "<string>:" in result["failure"], result
        assert "node locked (CourierNode(Echo))" in result["failure"], result
    assert not runs.exists()
    if front_end == "topo run":
        assert "no_such_module_here" in done.stderr and "Traceback" not in done.stderr


GOOD = "name: good\nnodes:\n  a: {target: 'bk_nodes:Echo'}\n"


@pytest.mark.parametrize(
    ("front_end", "failure"),
    [
        ("topo run", "exit 1"),
        ("topo.launch", "TopoError: error: cannot make the run directory"),
        ("lp.launch", "TopoError: error: cannot make the run directory"),
    ],
)
def test_a_run_directory_that_cannot_be_made_closes_the_warmed_backend(
    tmp_path: Path, front_end: str, failure: str
) -> None:
    """A good program whose run directory cannot be made (its parent is a file): the
    error names the place, nothing starts, and the warmed fork server is closed."""
    path, runs = tmp_path / "good.yaml", tmp_path / "runs"
    path.write_text(GOOD)
    runs.write_text("a file where the runs would go\n")
    done, result = _run_front_end(tmp_path, front_end, path, runs, "good")
    assert result["failure"].startswith(failure), result
    if front_end == "topo run":
        assert "cannot make the run directory" in done.stderr
        assert "Traceback" not in done.stderr
