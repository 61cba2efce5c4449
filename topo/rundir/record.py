"""``run.json``: how a run was started, written once into its run directory.

Enough to start the same program again (``topo run --from RUN_DIR``) and to tell
later what ran: the command line, the parameters as given and as resolved, the
backend and its options, the run options, topo's and Python's versions, the host,
and the git commit of the project the topology file is in (with whether its tree had
uncommitted changes). Reading it back checks it (a damaged file is an error that
says so, not a traceback); a field it does not know is passed over.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path, PurePath
from typing import Any

from topo.rundir.layout import RUN_FILE, TOPOLOGY_FILE

GIT_TIMEOUT_S = 2.0
FORMAT = 1


@dataclass(frozen=True)
class GitState:
    """The project's commit when the topology file is in a git work tree."""

    root: str
    commit: str
    dirty: bool | None  # uncommitted changes to tracked files; None: git did not say in time


@dataclass(frozen=True)
class RunRecord:
    """How a run was started (``run.json``)."""

    argv: list[str]  # the command line of the process that started the run
    cwd: str
    file: str | None  # the topology file (absolute); None for a program made in Python
    params_given: list[str]  # -p NAME=VALUE as given
    params: dict[str, Any]  # every parameter's resolved value
    backend: str
    backend_options: dict[str, Any]
    grace_s: float | None
    log_dir: str
    log_max_mb: float | None
    log_keep: int
    disable_run: bool
    topo_version: str
    python: str
    host: str
    git: GitState | None
    started: str  # local time, ISO 8601
    from_run: str | None = None  # the run directory this one reran (topo run --from)
    metrics_to: list[str] = field(default_factory=list)  # --metrics-to: csv, tensorboard
    format: int = FORMAT

    def to_json(self) -> str:
        """The record as JSON text (values JSON cannot hold are written as text)."""
        return json.dumps(asdict(self), indent=2, default=str) + "\n"


class RecordError(ValueError):
    """A run directory without a usable ``run.json``."""


def git_state(where: Path) -> GitState | None:
    """The commit of the git work tree ``where`` is in, None when there is none (or no
    git, or git did not answer within ``GIT_TIMEOUT_S``)."""

    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(
                ["git", "-C", str(where), *args],
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError):
            return None

    head = git("rev-parse", "HEAD", "--show-toplevel")
    if head is None or head.returncode != 0:
        return None
    lines = head.stdout.split()
    if len(lines) != 2:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    dirty = None if status is None or status.returncode != 0 else bool(status.stdout.strip())
    return GitState(root=lines[1], commit=lines[0], dirty=dirty)


class GitLookup:
    """``git_state(where)`` asked in a thread from now on (the program compiles meanwhile);
    ``result()`` waits for it."""

    def __init__(self, where: Path) -> None:
        self._found: GitState | None = None
        self._thread = threading.Thread(target=self._look, args=(where,), daemon=True)
        self._thread.start()

    def _look(self, where: Path) -> None:
        self._found = git_state(where)

    def result(self) -> GitState | None:
        """The state found (None: no work tree, no git, or no answer in time)."""
        self._thread.join(2 * GIT_TIMEOUT_S + 1)
        return self._found


def git_lookup(file: str | Path | None) -> GitLookup:
    """Start looking up the commit of the project ``file`` is in (the current directory's
    for a program made in Python)."""
    return GitLookup(Path(file).absolute().parent if file is not None else Path.cwd())


def _plain(value: Any) -> Any:
    """A backend option as JSON holds it: paths absolute, so a rerun elsewhere finds them."""
    if isinstance(value, PurePath):
        return str(Path(value).absolute())
    return value


def make_record(
    *,
    backend: str,
    backend_options: Mapping[str, Any] | None,
    file: str | Path | None,
    params_given: Sequence[str],
    params: Mapping[str, Any],
    grace_s: float | None,
    log_dir: Path,
    log_max_mb: float | None,
    log_keep: int,
    disable_run: bool,
    topo_version: str,
    argv: Sequence[str] | None = None,
    from_run: str | Path | None = None,
    git: GitLookup | None = None,
    metrics_to: Sequence[str] = (),
) -> RunRecord:
    """The record of a run about to start in this process (``argv`` None: ``sys.argv``;
    ``git``: the lookup started for ``file``, else one is made now)."""
    import platform
    import socket

    path = None if file is None else Path(file).absolute()
    return RunRecord(
        argv=list(sys.argv if argv is None else argv),
        cwd=os.getcwd(),
        file=None if path is None else str(path),
        params_given=list(params_given),
        params=dict(params),
        backend=backend,
        backend_options={k: _plain(v) for k, v in (backend_options or {}).items()},
        grace_s=grace_s,
        log_dir=str(log_dir.absolute()),
        log_max_mb=log_max_mb,
        log_keep=log_keep,
        disable_run=disable_run,
        topo_version=topo_version,
        python=platform.python_version(),
        host=socket.gethostname(),
        git=(git or git_lookup(path)).result(),
        started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        from_run=None if from_run is None else str(Path(from_run).absolute()),
        metrics_to=list(metrics_to),
    )


def write_record(run_dir: Path, record: RunRecord) -> None:
    """Write ``run.json`` (readable by the user only, as everything in a run directory)."""
    path = run_dir / RUN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(record.to_json())


def record_change(
    run_dir: Path,
    file: str | None,
    params_given: list[str],
    params: dict[str, Any],
    topology_yaml: str | None,
) -> None:
    """``topo apply`` changed the run's program: ``run.json`` says the file and parameters
    it runs now, and ``topology.yaml`` holds that file's text, so that ``--from`` and
    ``--resume`` bring back the program as it runs (the start's are in ``changes/``)."""
    path = run_dir / RUN_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return  # a run started without a record (a program made in Python)
    data.update(file=file, params_given=list(params_given), params=dict(params))
    tmp = path.with_name(f".{RUN_FILE}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    if topology_yaml is not None:
        tmp = run_dir / f".{TOPOLOGY_FILE}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(topology_yaml)
        os.replace(tmp, run_dir / TOPOLOGY_FILE)


def read_record(run_dir: Path) -> RunRecord:
    """The ``run.json`` of ``run_dir``, checked; ``RecordError`` saying what is wrong."""
    path = run_dir / RUN_FILE
    if not run_dir.is_dir():
        raise RecordError(f"{run_dir} is not a directory")
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise RecordError(
            f"{run_dir} has no {RUN_FILE}: it is not a run directory, or its run was started "
            "by a topo that did not record how"
        ) from None
    except (OSError, ValueError) as exc:
        raise RecordError(f"cannot read {path}: {exc}") from None
    try:
        return _record(data)
    except _Damaged as exc:
        raise RecordError(f"{path} is damaged: {exc.where}: {exc.what}") from None


class _Damaged(Exception):
    """A value of ``run.json`` that is not what its field holds."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")
        self.where, self.what = where, what


# A field's type (as the dataclasses spell it) -> what a JSON value of it is, in words.
_WORDS = {
    "str": "a string",
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "None": "null",
    "list[str]": "a list of strings",
    "dict[str, Any]": "an object",
    "GitState": "an object",
}


def _record(data: Any) -> RunRecord:
    """``run.json``'s JSON as a ``RunRecord``, each field checked against its type."""
    if not isinstance(data, dict):
        raise _Damaged("the file", f"expected an object, got {type(data).__name__}")
    return _fill(RunRecord, data, "")


def _fill(cls: Any, data: dict[str, Any], prefix: str) -> Any:
    values = {}
    for f in fields(cls):
        where = prefix + f.name
        if f.name in data:
            values[f.name] = _checked(data[f.name], str(f.type), where)
        elif f.default is MISSING and f.default_factory is MISSING:
            raise _Damaged(where, "missing")
    return cls(**values)


def _checked(value: Any, annotation: str, where: str) -> Any:
    """``value`` if it is of type ``annotation`` (an int given for a float, as a float)."""
    kinds = [k.strip() for k in annotation.split("|")]
    for kind in kinds:
        if kind == "None" and value is None:
            return None
        if kind in ("str", "bool") and isinstance(value, str if kind == "str" else bool):
            return value
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if kind == "int" and number and isinstance(value, int):
            return value
        if kind == "float" and number:
            return float(value)
        if kind == "list[str]" and isinstance(value, list):
            if all(isinstance(item, str) for item in value):
                return value
        if kind == "dict[str, Any]" and isinstance(value, dict):
            return value
        if kind == "GitState" and isinstance(value, dict):
            return _fill(GitState, value, where + ".")
    expected = " or ".join(_WORDS[k] for k in kinds)
    raise _Damaged(where, f"expected {expected}, got {json.dumps(value, default=str)[:60]}")


def given_params(run_dir: Path) -> list[str]:
    """The ``-p`` values a run runs with now: as given at its start (``--from``: with the
    run it reran's), as every change ``topo apply`` made left them; read cheaply (no
    validation: ``topo apply`` and ``topo diff`` start from them). Empty when the run
    has no record (a program made in Python) or it holds none."""
    try:
        given = json.loads((run_dir / RUN_FILE).read_text()).get("params_given")
    except (OSError, ValueError, AttributeError):
        return []
    return [str(t) for t in given] if isinstance(given, list) else []


def named_run_dir(args: Sequence[str]) -> str | None:
    """The run directory a command line names with ``--from DIR`` or ``--resume DIR`` (or
    ``=DIR``; the last one given), None when none is; ``args`` are the words after the command."""
    found = None
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            break
        if arg in ("--from", "--resume"):
            found = next(rest, None)
        elif arg.startswith(("--from=", "--resume=")):
            found = arg.partition("=")[2]
    return found


def recorded_backend(run_dir: str | Path) -> tuple[str, dict[str, Any]] | None:
    """The backend and its options a run directory's ``run.json`` names, read cheaply (no
    validation: for choosing defaults before the command line is parsed); None when
    there is none to read."""
    try:
        data = json.loads((Path(run_dir) / RUN_FILE).read_text())
        name, options = data["backend"], data.get("backend_options") or {}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(name, str) or not isinstance(options, dict):
        return None
    return name, options
