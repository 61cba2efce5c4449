"""The names of a run directory: log files of odd ids, an executable's output, rotated
files in order, a fresh directory's name; and no module outside ``topo.rundir`` spells
a name of its own."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from topo.rundir import layout
from topo.rundir.layout import (
    agent_log_path,
    exe_output_path,
    fresh_run_dir,
    holds_run,
    log_files,
    log_name,
    log_path,
    metrics_path,
    reused_warning,
    with_rotated,
)

PACKAGE = Path(__file__).resolve().parents[2] / "topo"


@dataclass(frozen=True)
class Exe:
    id: str
    nodes: tuple[str, ...]


@pytest.mark.parametrize(
    ("node", "file"),
    [
        ("learner", "learner.log"),
        ("actor/3", "actor_3.log"),
        ("a/b/c", "a_b_c.log"),
        ("learner.v2", "learner.v2.log"),
        ("ünïcode node", "ünïcode node.log"),
        ("-dash", "-dash.log"),
    ],
)
def test_a_node_id_is_a_file_name_in_logs(tmp_path: Path, node: str, file: str) -> None:
    assert log_path(tmp_path, node) == tmp_path / "logs" / file
    assert log_name(node) == f"logs/{file}"
    assert tmp_path / log_name(node) == log_path(tmp_path, node)
    assert metrics_path(tmp_path, node) == tmp_path / "metrics" / file.replace(".log", ".jsonl")


def test_an_executable_writes_to_its_nodes_log_or_to_its_own(tmp_path: Path) -> None:
    alone = Exe("actor/0", ("actor/0",))
    packed = Exe("set/0", ("learner", "replay/0"))
    assert exe_output_path(tmp_path, alone) == tmp_path / "logs" / "actor_0.log"
    assert exe_output_path(tmp_path, packed) == tmp_path / "logs" / "set_0.log"
    files = log_files(tmp_path, ["actor/0", "learner", "replay/0"], [alone, packed])
    assert list(files) == ["actor/0", "learner", "replay/0", "set/0"]
    assert files["set/0"] == exe_output_path(tmp_path, packed)


def test_an_agent_log_is_named_by_its_host(tmp_path: Path) -> None:
    assert agent_log_path(tmp_path, "10.0.0.7") == tmp_path / "agents" / "10.0.0.7.log"
    assert agent_log_path(tmp_path, "h1/gpu") == tmp_path / "agents" / "h1_gpu.log"


def test_rotated_files_come_oldest_first_by_number(tmp_path: Path) -> None:
    log = tmp_path / "actor_0.log"
    for suffix in ("", ".1", ".2", ".10", ".old", ".1.tmp"):
        (tmp_path / f"actor_0.log{suffix}").write_text("x")
    (tmp_path / "actor_0.log.3").mkdir()  # a number, even a directory: as rotation made it
    names = [p.name for p in with_rotated(log)]
    assert names == [f"actor_0.log.{n}" for n in (10, 3, 2, 1)] + ["actor_0.log"]
    assert with_rotated(tmp_path / "none.log") == [tmp_path / "none.log"]


def test_a_fresh_run_directory_is_numbered_when_its_name_is_taken(tmp_path: Path) -> None:
    first = fresh_run_dir(tmp_path, "agent")
    assert first.parent == tmp_path and first.name.startswith("agent-")
    first.mkdir()
    second = fresh_run_dir(tmp_path, "agent")
    if second.name.startswith(first.name):  # the same second: numbered
        assert second.name == f"{first.name}-2"
    assert not second.exists()


def test_a_directory_holding_a_run_is_told(tmp_path: Path) -> None:
    assert not holds_run(tmp_path)
    (tmp_path / "status.json").write_text("{}")
    assert holds_run(tmp_path)
    assert "program.json, status.json and run.json replaced" in reused_warning(tmp_path)


def _spelled(path: Path, names: set[str]) -> list[str]:
    """Where ``path`` spells one of ``names`` itself: a string that is the name (or ends
    in ``/name``), or a name joined to a path with ``/``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            right = node.right
            if isinstance(right, ast.Constant) and isinstance(right.value, str):
                text = right.value.split("/")[0]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "." in node.value:  # a file's name (a directory's is too common a word)
                text = node.value.rsplit("/", 1)[-1]
        if text in names:
            found.append(f"{path.parent.name}/{path.name}:{node.lineno}: {text!r}")
    return found


def test_no_module_outside_the_room_spells_a_run_directory_name() -> None:
    names = {v for k, v in vars(layout).items() if k.isupper() and isinstance(v, str)}
    assert {"program.json", "status.json", "logs", "agents"} <= names
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name != "rundir":
            found += _spelled(path, names)
    assert found == [], "\n".join(found)


def test_the_check_finds_a_name_spelled_again(tmp_path: Path) -> None:
    """The checker itself: a path joined with a name, and a name as a value, are found;
    the same words in prose are not."""
    module = tmp_path / "planted.py"
    module.write_text(
        'from pathlib import Path\nA = Path("r") / "logs" / "x.log"\nB = "run.json"\n'
        'C = "the logs and run.json of a run"\n'
    )
    found = sorted(line.split(": ", 1)[1] for line in _spelled(module, {"logs", "run.json"}))
    assert found == ["'logs'", "'run.json'"]


def test_the_room_imports_the_standard_library_only() -> None:
    """``topo.rundir`` (and ``topo.runs``, which ``topo ps`` and ``topo logs`` import)
    take nothing from outside the standard library: those commands start fast, and the
    agents on other hosts read the names without topo's dependencies."""
    found = []
    for room in ("rundir", "runs"):
        for path in sorted((PACKAGE / room).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    tops = [a.name.split(".")[0] for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    tops = [node.module.split(".")[0]]
                else:
                    continue
                found += [
                    f"{path.name}: {top}"
                    for top in tops
                    if top != "topo" and top not in sys.stdlib_module_names
                ]
    assert found == [], "\n".join(found)
