"""The run directory tells how to rerun: ``run.json``, the saved ``topology.yaml`` with
the parameters as run, ``topo run --from RUN_DIR``, and a warning for a reused
``--run-dir`` -- all through the real ``topo run`` on real processes."""

from __future__ import annotations

import json
import os
import platform
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from topo.api import load

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "topologies" / "consumer_producers.yaml"
TOPO = [sys.executable, "-m", "topo"]


def _topo(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="200")
    return subprocess.run(
        [*TOPO, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def _runs(log_dir: Path) -> list[Path]:
    return (
        sorted(p for p in log_dir.iterdir() if p.is_dir() and not p.is_symlink())
        if log_dir.exists()
        else []
    )


def _one_run(log_dir: Path, *args: str) -> Path:
    """``topo run`` that ends by itself; the run directory it made."""
    before = set(_runs(log_dir))
    result = _topo("run", *args, "-q", "--log-dir", str(log_dir))
    assert result.returncode == 0, result.stderr
    made = [p for p in _runs(log_dir) if p not in before]
    assert len(made) == 1, made
    return made[0]


def _git_head() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
        )
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@pytest.mark.slow
def test_run_json_says_how_the_run_was_started(tmp_path: Path) -> None:
    run = _one_run(
        tmp_path, str(EXAMPLE), "-p", "num_producers=2", "--grace", "2", "--log-keep", "4"
    )
    path = run / "run.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    record = json.loads(path.read_text())
    assert record["argv"][1:] == [
        "run",
        str(EXAMPLE),
        "-p",
        "num_producers=2",
        "--grace",
        "2",
        "--log-keep",
        "4",
        "-q",
        "--log-dir",
        str(tmp_path),
    ]
    assert record["params_given"] == ["num_producers=2"]
    assert record["params"] == {"num_producers": 2, "work_items": 32}
    assert record["file"] == str(EXAMPLE)
    assert record["cwd"] == str(ROOT)
    assert (record["backend"], record["backend_options"]) == ("procs", {})
    assert (record["grace_s"], record["log_keep"]) == (2.0, 4)
    assert record["log_dir"] == str(tmp_path)
    import topo

    assert record["topo_version"] == topo.__version__
    assert record["python"] == platform.python_version()
    assert record["host"] == socket.gethostname()
    head = _git_head()
    if head is None:
        assert record["git"] is None
    else:
        assert record["git"]["commit"] == head and record["git"]["root"]
        assert record["git"]["dirty"] in (True, False)
    for name in ("program.json", "topology.yaml"):
        assert stat.S_IMODE((run / name).stat().st_mode) == 0o600


def test_no_git_work_tree_records_no_commit(tmp_path: Path) -> None:
    from topo.rundir.record import git_state

    assert git_state(tmp_path) is None  # tmp is in no work tree
    head = _git_head()
    if head is not None:
        state = git_state(ROOT / "examples")
        assert state is not None and state.commit == head


SAVED = """\
# my topology
name: saved
params:
  n: 4          # how many
  lr: {default: 0.1, type: float, help: learning rate}
  tag: "x"
  label: "run-${n}"
nodes:
  w:
    target: examples.x:Y   # the workers
    count: ${n}
    args: {lr: "${lr}", t: "${tag}-${replica}"}
"""


def test_saved_topology_has_the_values_given_as_defaults(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(SAVED)
    loaded = load(path, ["n=2", "lr=0.5", "tag=${a}"])
    text = loaded.yaml_text
    assert "n: 2          # how many" in text  # comments and layout kept
    assert "{default: 0.5, type: float, help: learning rate}" in text
    assert "count: ${n}" in text and 'label: "run-${n}"' in text  # still parameterised
    saved = tmp_path / "saved.yaml"
    saved.write_text(text)
    again = load(saved)
    assert again.spec.param_values == loaded.spec.param_values
    assert again.spec.param_values["tag"] == "${a}"  # a -p text stays literal
    assert [n.id for n in again.program.nodes] == ["w/0", "w/1"]
    more = load(saved, ["n=3"])  # -p on the saved file still works
    assert [n.id for n in more.program.nodes] == ["w/0", "w/1", "w/2"]
    assert more.spec.param_values["label"] == "run-3"
    assert more.yaml_text.count("# as run:") == 1  # saved again: one header, not two
    assert "# as run: the defaults of n are the values given with -p" in more.yaml_text
    assert "n: 3          # how many" in more.yaml_text


def test_saved_topology_of_a_file_that_extends_another(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        "name: base\nparams: {n: 4}\nnodes:\n  w: {target: 'examples.x:Y', count: '${n}'}\n"
    )
    (tmp_path / "child.yaml").write_text("extends: base.yaml\nname: child\n")
    loaded = load(tmp_path / "child.yaml", ["n=1"])
    elsewhere = tmp_path / "run"
    elsewhere.mkdir()
    (elsewhere / "topology.yaml").write_text(loaded.yaml_text)  # without the base beside it
    again = load(elsewhere / "topology.yaml")
    assert again.program.name == "child"
    assert [n.id for n in again.program.nodes] == ["w/0"]
    assert [n.id for n in load(elsewhere / "topology.yaml", ["n=2"]).program.nodes] == [
        "w/0",
        "w/1",
    ]


@pytest.mark.slow
def test_from_reruns_the_program_with_its_options(tmp_path: Path) -> None:
    first = _one_run(tmp_path, str(EXAMPLE), "-p", "num_producers=2", "-b", "threads")
    # From another directory: the run's topology, parameters and backend, not procs' default.
    again = _one_run(tmp_path, "--from", str(first), "--grace", "3")
    record = json.loads((again / "run.json").read_text())
    assert record["backend"] == "threads"
    assert record["params"] == {"num_producers": 2, "work_items": 32}
    assert record["grace_s"] == 3.0 and record["from_run"] == str(first)
    assert _same_nodes(first, again)
    # Options given override the recorded ones; -p applies on top of the kept values.
    third = _one_run(tmp_path, "--from", str(again), "-p", "num_producers=3", "-b", "procs")
    record = json.loads((third / "run.json").read_text())
    assert record["backend"] == "procs" and record["grace_s"] == 3.0
    assert record["params"] == {"num_producers": 3, "work_items": 32}
    status = json.loads((third / "status.json").read_text())
    assert sorted(n["id"] for n in status["nodes"]) == [
        "consumer",
        "producer/0",
        "producer/1",
        "producer/2",
    ]


def _same_nodes(a: Path, b: Path) -> bool:
    ids = [[n["id"] for n in json.loads((d / "status.json").read_text())["nodes"]] for d in (a, b)]
    return ids[0] == ids[1]


def test_from_a_directory_that_is_no_run_is_an_error(tmp_path: Path) -> None:
    logs = tmp_path / "runs"
    result = _topo("run", "--from", str(tmp_path), "--log-dir", str(logs))
    assert result.returncode == 1
    assert f"cannot rerun {tmp_path}" in result.stderr and "run.json" in result.stderr
    assert not logs.exists()  # nothing started
    (tmp_path / "run.json").write_text('{"backend": 3}')
    result = _topo("run", "--from", str(tmp_path), "--log-dir", str(logs))
    assert result.returncode == 1 and "damaged" in result.stderr, result.stderr
    assert not logs.exists()


def test_file_and_from_together_or_no_file_is_a_command_line_mistake(tmp_path: Path) -> None:
    result = _topo("run", str(EXAMPLE), "--from", str(tmp_path), "--log-dir", str(tmp_path))
    assert result.returncode == 2  # docs/running.md: conflicting flags exit 2
    assert "give FILE or --from RUN, not both" in result.stderr
    result = _topo("run", "--log-dir", str(tmp_path))
    assert result.returncode == 2 and "missing FILE" in result.stderr
    assert "--from RUN" in result.stderr and "--resume RUN" in result.stderr
    assert _runs(tmp_path) == []


@pytest.mark.slow
def test_reusing_a_run_dir_warns(tmp_path: Path) -> None:
    run_dir = tmp_path / "same"
    args = ("run", str(EXAMPLE), "-q", "-b", "threads", "--run-dir", str(run_dir))
    first = _topo(*args)
    assert first.returncode == 0 and "warning" not in first.stderr
    second = _topo(*args)
    assert second.returncode == 0  # the run goes on
    assert f"warning: run directory {run_dir} already holds a run" in second.stderr
    status = json.loads((run_dir / "status.json").read_text())
    assert any("already holds a run" in w for w in status["warnings"])


def test_from_takes_the_recorded_backend_options(tmp_path: Path) -> None:
    """A run recorded on ssh reruns there with its inventory (no --hosts needed): here
    one that is gone, so the rerun stops at it, naming it, before anything starts."""
    run_dir = tmp_path / "recorded"
    run_dir.mkdir()
    (run_dir / "topology.yaml").write_text(EXAMPLE.read_text())
    record = json.loads(_record_of(tmp_path).read_text())
    gone = tmp_path / "gone-inventory.yaml"
    record.update(backend="ssh", backend_options={"hosts": str(gone)})
    (run_dir / "run.json").write_text(json.dumps(record))
    logs = tmp_path / "runs"
    result = _topo("run", "--from", str(run_dir), "-q", "--log-dir", str(logs))
    assert result.returncode == 1
    assert f"no such file: {gone}" in result.stderr, result.stderr
    assert not logs.exists()


def _record_of(tmp_path: Path) -> Path:
    """A real run.json, made by the Python API without running anything."""
    from topo.api import prepare
    from topo.backends.logs import make_run_dir

    launcher = prepare(EXAMPLE, "threads", run_dir=tmp_path / "made")  # threads: nothing warms
    request = launcher.request
    opts = request.options
    made = make_run_dir(launcher.program, opts.log_dir, opts.run_dir, None, request.record)
    return made / "run.json"
