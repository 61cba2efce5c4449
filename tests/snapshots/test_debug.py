"""``breakpoint()`` in a node: the node stops there and the run says so (``at breakpoint
(file:line)`` in status.json and the live table, no stall flagged); ``topo debug`` drives
its pdb over the run's control channel and the node's state door -- print a local, step,
continue -- and the node goes on; detaching leaves it stopped; bad input is one error.
Outside a node, ``breakpoint()`` is Python's own."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.cli.operate import env, run_detached, run_pids, topo
from topo.rundir.layout import log_path
from topo.runs.control import request
from topo.runtime import debugger
from topo.testing import wait_for_text, wait_gone, wait_until

TOPOLOGY = """\
name: bp
nodes:
  stopper: {target: "tests.snapshots.debug_nodes:Stopper"}
  plain: {target: "tests.snapshots.debug_nodes:Plain"}
"""


def _status_of(run_dir: Path, node: str) -> dict[str, Any]:
    status = json.loads((run_dir / "status.json").read_text())
    [entry] = [n for n in status["nodes"] if n["id"] == node]
    return dict(entry)


def _debug(run_dir: Path, action: str, text: str = "", node: str = "stopper") -> dict[str, Any]:
    control = json.loads((run_dir / "status.json").read_text())["control"]
    asked = {"op": "debug", "node": node, "action": action, "text": text, "wait_s": 5.0}
    return request(run_dir, control, asked, timeout=60)


def _until_prompt(run_dir: Path) -> str:
    """The session's output up to pdb's next prompt."""
    seen = ""
    while not seen.endswith("(Pdb) "):
        answer = _debug(run_dir, "read")
        assert answer["ok"] and answer["active"], (answer, seen)
        seen += answer["output"]
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_a_node_at_a_breakpoint_is_debugged_and_goes_on(
    topo_launch: Callable[..., Any], tmp_path: Path, backend: str
) -> None:
    file = tmp_path / "bp.yaml"
    file.write_text(TOPOLOGY)
    run = topo_launch(file, backend, ready_timeout=60)
    wait_until(lambda: _status_of(run.run_dir, "stopper")["breakpoint"], 60, what="a breakpoint")
    assert _status_of(run.run_dir, "stopper")["breakpoint"] == "debug_nodes.py:12"
    assert _status_of(run.run_dir, "stopper")["state"] == "running"

    shown = _until_prompt(run.run_dir)
    assert "debug_nodes.py(13)run()\n-> value += 1" in shown, shown
    assert _debug(run.run_dir, "write", "p value")["ok"]
    assert _until_prompt(run.run_dir).startswith("41\n")
    _debug(run.run_dir, "write", "n")  # a step
    assert "debug_nodes.py(14)run()" in _until_prompt(run.run_dir)
    _debug(run.run_dir, "write", "p value")
    assert _until_prompt(run.run_dir).startswith("42\n")
    _debug(run.run_dir, "write", "c")
    wait_until(lambda: not _debug(run.run_dir, "read")["active"], 30, what="the node let go")
    wait_for_text(log_path(run.run_dir, "stopper"), "after the breakpoint: 42", 30)
    wait_until(lambda: _status_of(run.run_dir, "stopper")["breakpoint"] is None, 30)
    assert _status_of(run.run_dir, "stopper")["stalled_s"] is None

    other = _debug(run.run_dir, "read", node="plain")  # a node at no breakpoint
    assert other["ok"] and not other["active"]
    nope = _debug(run.run_dir, "read", node="nope")
    assert nope == {
        "ok": False,
        "error": "the program has no node 'nope' (its nodes: stopper, plain)",
    }
    assert run.stop(timeout=60) == 0


@pytest.mark.slow
def test_topo_debug_detaches_leaving_the_node_stopped_then_lets_it_go(tmp_path: Path) -> None:
    file = tmp_path / "bp.yaml"
    file.write_text(TOPOLOGY)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    try:
        wait_until(lambda: _status_of(run_dir, "stopper")["breakpoint"], 60, what="a breakpoint")
        shown = topo("status", run_id, cwd=tmp_path)
        assert "at breakpoint (debug_nodes.py:12)" in shown.stdout, shown.stdout

        def session() -> Any:
            child = pexpect.spawn(
                sys.executable,
                ["-m", "topo", "debug", run_id],  # the one node at a breakpoint, unnamed
                cwd=str(tmp_path),
                env=env(tmp_path),
                encoding="utf-8",
                timeout=60,
            )
            child.expect(r"── stopper at breakpoint \(debug_nodes\.py:12\)")
            child.expect(r"\(Pdb\) ")
            return child

        first = session()
        first.sendline("p value * 2")
        first.expect("82")
        first.expect(r"\(Pdb\) ")
        first.sendeof()  # Ctrl-D: detach
        first.expect("detached: stopper stays at its breakpoint")
        first.expect(pexpect.EOF)
        first.close()
        assert first.exitstatus == 0
        assert _status_of(run_dir, "stopper")["breakpoint"] == "debug_nodes.py:12"

        second = session()
        second.sendline("c")
        second.expect("stopper goes on")
        second.expect(pexpect.EOF)
        second.close()
        assert second.exitstatus == 0
        wait_for_text(log_path(run_dir, "stopper"), "after the breakpoint: 42", 30)
        wait_until(lambda: _status_of(run_dir, "stopper")["breakpoint"] is None, 30)

        none = topo("debug", run_id, cwd=tmp_path)
        assert none.returncode == 1
        assert f"no node of run {run_id} is at a breakpoint" in none.stderr, none.stderr
        named = topo("debug", run_id, "plain", cwd=tmp_path)
        assert named.returncode == 1 and "node plain is not at a breakpoint" in named.stderr
        assert "Traceback" not in none.stderr + named.stderr
    finally:
        assert topo("stop", run_id, cwd=tmp_path).returncode == 0
        assert not wait_gone(pids, 30)
    ended = topo("debug", run_id, cwd=tmp_path)
    assert ended.returncode == 1 and "is not running" in ended.stderr


@pytest.mark.slow
def test_the_program_s_stop_lets_a_node_at_a_breakpoint_go_on(
    topo_launch: Callable[..., Any], tmp_path: Path
) -> None:
    file = tmp_path / "bp.yaml"
    file.write_text(TOPOLOGY)
    run = topo_launch(file, "procs", ready_timeout=60, grace_s=20)
    wait_until(lambda: _status_of(run.run_dir, "stopper")["breakpoint"], 60, what="a breakpoint")
    assert run.stop(timeout=60) == 0  # not killed at the grace: it went on and stopped
    assert "after the breakpoint: 42" in log_path(run.run_dir, "stopper").read_text()
    assert _status_of(run.run_dir, "stopper")["state"] != "killed"


def test_outside_a_node_breakpoint_is_python_s_own(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[Any] = []
    monkeypatch.delenv("PYTHONBREAKPOINT", raising=False)
    monkeypatch.setattr(sys, "breakpointhook", sys.breakpointhook)
    monkeypatch.setattr(debugger, "_previous", lambda *a, **k: called.append((a, k)))
    assert debugger.current_node_info() is None
    debugger.hook(1, key=2)
    assert called == [((1,), {"key": 2})]
    debugger.install()
    assert sys.breakpointhook is debugger.hook
    monkeypatch.setenv("PYTHONBREAKPOINT", "0")  # a user's choice is kept
    monkeypatch.setattr(sys, "breakpointhook", os.abort)
    debugger.install()
    assert sys.breakpointhook is os.abort
    monkeypatch.setenv("PYTHONBREAKPOINT", "ray.util.rpdb.set_trace")  # Ray's is not
    debugger.install()
    assert sys.breakpointhook is debugger.hook and "PYTHONBREAKPOINT" not in os.environ


def test_a_node_at_a_breakpoint_in_its_constructor_is_said_to_be_out_of_reach() -> None:
    from topo.runs.node_status import NodeStatus
    from topo.supervisor.debugging import debug_node

    class Doors:
        served = {"learner"}

        def ask(self, *args: Any) -> Any:
            raise AssertionError("a starting node is not asked")

    starting = NodeStatus("learner", "learner", state="starting", breakpoint="learner.py:3")
    answer = debug_node("learner", "read", "", 1.0, {"learner": starting}, Doors())
    assert answer == {
        "ok": False,
        "error": "node learner is at a breakpoint in its constructor: topo debug reaches a "
        "node once it is up (a breakpoint() in run() or in a method)",
    }
