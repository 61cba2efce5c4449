"""What the launcher says when a Ray node's agent dies, and how a Ray node's agent
finds the directories of agents that are gone (no Ray)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from topo.backends.ray.agent import MARK, mark_owner, sweep_stale
from topo.backends.ray.runner import why_dead


def _agent_dir(root: Path, run: str, name: str) -> Path:
    path = root / run / name
    (path / "logs").mkdir(parents=True)
    (path / "logs" / "w.log").write_text("output\n")
    return path


def test_the_directories_of_agents_that_are_gone_are_removed(tmp_path: Path) -> None:
    mine = _agent_dir(tmp_path, "prog-a", "n1-0")
    mark_owner(mine)  # this process: alive
    dead = _agent_dir(tmp_path, "prog-b", "n1-0")
    subprocess.run(  # a process that marks its directory, then ends
        [
            sys.executable,
            "-c",
            f"from topo.backends.ray.agent import mark_owner as m; "
            f"from pathlib import Path; m(Path({str(dead)!r}))",
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=True,
    )
    earlier = _agent_dir(tmp_path, "prog-c", "n2-0")  # an agent of an earlier boot
    fields = (mine / MARK).read_text().split()
    (earlier / MARK).write_text(" ".join([*fields[:3], "another-boot"]))
    elsewhere = _agent_dir(tmp_path, "prog-d", "n3-0")  # another pid namespace, same boot
    (elsewhere / MARK).write_text(" ".join(["1", "0.0", "1", fields[3]]))
    unmarked = _agent_dir(tmp_path, "prog-e", "exe-0")  # not an agent's: left alone
    assert sweep_stale(tmp_path) == [dead, earlier]
    assert not (tmp_path / "prog-b").exists() and not (tmp_path / "prog-c").exists()
    assert mine.is_dir() and elsewhere.is_dir() and unmarked.is_dir()


def test_why_an_agent_died_in_a_few_words() -> None:
    died = RuntimeError(
        "The actor died unexpectedly before finishing this task.\n\tclass_name: NodeAgent\n"
        "The actor is dead because its worker process has died. Worker exit type: "
        "SYSTEM_ERROR Worker exit detail: ..."
    )
    assert why_dead(died) == "its worker process has died"
    raised = RuntimeError(
        "The actor died because of an error raised in its creation task, ray::NodeAgent:\n"
        "Traceback (most recent call last):\n  File ...\n"
        "ModuleNotFoundError: No module named 'topo'"
    )
    assert why_dead(raised) == "its constructor raised ModuleNotFoundError: No module named 'topo'"
