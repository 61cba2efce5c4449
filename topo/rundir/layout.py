"""Every name in a run directory, and the paths made of them.

A run directory (default ``./runs/<name>-<timestamp>/``, private to its user)::

    program.json          the program as it runs (topo.ir JSON; ``topo apply`` rewrites it)
    topology.yaml         the topology file as it ran, its -p values as defaults
    run.json              how the run was started (``topo.rundir.record``)
    status.json           the run and its nodes, kept current while it runs (``status``)
    events.jsonl          every status event, one JSON object a line (``.1``: the older)
    control.key           the key of the run's control channel (``topo.runs.control``)
    launcher.log          a detached launcher's own output (``topo run -d``)
    forkserver.log        the procs fork server's own output
    crash.log             threads: the node that took the launcher down
    ui.log                the dashboard's access log, when one served the run
    metrics.png           ``topo plot``'s picture, unless told another place
    logs/<id>.log         a node's output; an executable of several nodes also has its
                          own, for what is written below Python ("/" in ids becomes "_")
    logs/<id>.log.<n>     what a log's size cap rotated away, 1 the newest
    metrics/<id>.jsonl    a node's metric rows
    metrics/csv/, metrics/tensorboard/   the same rows as CSV and TensorBoard event
                          files, when the run asked (``topo run --metrics-to``)
    snapshots/<n>/        a snapshot: manifest.json and a state file a node
    changes/<gen>.json    each change ``topo apply`` made
    agents/<host>.log     ssh and ray: the agent of each host or Ray node

Standard library only, and nothing of topo: every room that reads or writes a run
directory (the supervisor, the backends and their agents on other hosts, the command
line, the dashboard) takes the names from here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

PROGRAM_FILE = "program.json"
TOPOLOGY_FILE = "topology.yaml"
RUN_FILE = "run.json"
STATUS_FILE = "status.json"
EVENTS_FILE = "events.jsonl"
CONTROL_KEY_FILE = "control.key"
LAUNCHER_LOG = "launcher.log"
FORKSERVER_LOG = "forkserver.log"
CRASH_LOG = "crash.log"
UI_LOG = "ui.log"
PLOT_FILE = "metrics.png"
LOGS_DIR = "logs"
METRICS_DIR = "metrics"
METRICS_CSV_DIR = "csv"  # under METRICS_DIR
METRICS_TENSORBOARD_DIR = "tensorboard"  # under METRICS_DIR
SNAPSHOTS_DIR = "snapshots"
MANIFEST_FILE = "manifest.json"  # in each snapshots/<n>/
CHANGES_DIR = "changes"
AGENTS_DIR = "agents"


class Packed(Protocol):
    """An executable as far as its files go: its id and the ids of its nodes (the IR's
    ``Executable`` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def nodes(self) -> Sequence[str]: ...


def safe_name(node_or_exe_id: str) -> str:
    """A node, executable or host id as a file name (``actor/3`` -> ``actor_3``)."""
    return node_or_exe_id.replace("/", "_").replace(os.sep, "_")


def log_name(node_or_exe_id: str) -> str:
    """``logs/<id>.log``: a log as the run directory names it (for messages)."""
    return f"{LOGS_DIR}/{safe_name(node_or_exe_id)}.log"


def log_path(run_dir: Path, node_or_exe_id: str) -> Path:
    """``<run_dir>/logs/<id>.log``."""
    return run_dir / LOGS_DIR / f"{safe_name(node_or_exe_id)}.log"


def exe_output_path(run_dir: Path, exe: Packed) -> Path:
    """Where an executable's raw stdout and stderr go: its node's log when it holds one
    node, else a log of its own."""
    return log_path(run_dir, exe.nodes[0] if len(exe.nodes) == 1 else exe.id)


def log_files(
    run_dir: Path, nodes: Iterable[str], executables: Iterable[Packed]
) -> dict[str, Path]:
    """The logs a run's output is in (label -> path): each node's, then the output of
    each executable of several nodes."""
    files = {node: log_path(run_dir, node) for node in nodes}
    for exe in executables:
        if len(exe.nodes) > 1:
            files[exe.id] = log_path(run_dir, exe.id)
    return files


def rotated_path(path: Path, n: int) -> Path:
    """``<path>.<n>``: the n-th newest file a size cap moved away from ``path``."""
    return path.with_name(f"{path.name}.{n}")


def with_rotated(path: Path) -> list[Path]:
    """``path`` after what rotation moved away from it, oldest first (``.log.3`` ...
    ``.log.1``, ``.log``); ``path`` is there whether it exists or not."""
    rotated = []
    for found in path.parent.glob(path.name + ".*"):
        suffix = found.name[len(path.name) + 1 :]
        if suffix.isdigit():
            rotated.append((int(suffix), found))
    return [p for _, p in sorted(rotated, reverse=True)] + [path]


def metrics_path(run_dir: Path, node_id: str) -> Path:
    """``<run_dir>/metrics/<node>.jsonl``."""
    return run_dir / METRICS_DIR / f"{safe_name(node_id)}.jsonl"


def metrics_files(run_dir: Path) -> list[Path]:
    """Every node's metric rows file of a run, in order of name (none: no ``metrics/``)."""
    try:
        return sorted((run_dir / METRICS_DIR).glob("*.jsonl"))
    except OSError:
        return []


def change_path(run_dir: Path, generation: int) -> Path:
    """``<run_dir>/changes/<generation>.json``: change ``generation`` of a run."""
    return run_dir / CHANGES_DIR / f"{generation}.json"


def agent_log_name(host: str) -> str:
    """``agents/<host>.log``: an agent's log as the run directory names it."""
    return f"{AGENTS_DIR}/{safe_name(host)}.log"


def agent_log_path(run_dir: Path, host: str) -> Path:
    """``<run_dir>/agents/<host>.log``: what the agent on ``host`` (an ssh host, a Ray
    node's address) said."""
    return run_dir / agent_log_name(host)


def fresh_run_dir(log_dir: Path, program_name: str) -> Path:
    """``<log_dir>/<name>-<timestamp>``, with ``-2``, ``-3`` ... when that is taken."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = log_dir / f"{program_name}-{stamp}"
    n = 1
    while run_dir.exists():
        n += 1
        run_dir = log_dir / f"{program_name}-{stamp}-{n}"
    return run_dir


def holds_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` already holds (the files of) a run."""
    return any((run_dir / name).exists() for name in (PROGRAM_FILE, STATUS_FILE, RUN_FILE))


def reused_warning(run_dir: Path) -> str:
    """What is said when a run starts in a directory that holds an earlier run."""
    return (
        f"run directory {run_dir} already holds a run: its logs are appended to, its "
        f"{PROGRAM_FILE}, {STATUS_FILE} and {RUN_FILE} replaced"
    )
