"""The runs of this machine: ``<state dir>/runs/<id>`` links to each run directory, and
``<log dir>/latest`` to the newest run started from a directory.

The state directory is ``$TOPO_HOME``, else ``$XDG_STATE_HOME/topo``, else
``~/.local/state/topo`` (private, 0700). A link whose run directory is gone is dropped;
of the ended runs only the newest ``KEEP_ENDED`` stay listed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

KEEP_ENDED = 200
LATEST = "latest"


def state_dir() -> Path:
    """Where topo keeps what concerns every run of this user on this machine."""
    home = os.environ.get("TOPO_HOME")
    if home:
        return Path(home)
    xdg = os.environ.get("XDG_STATE_HOME")
    return Path(xdg) / "topo" if xdg else Path.home() / ".local" / "state" / "topo"


def _runs_dir() -> Path:
    return state_dir() / "runs"


def new_run_id() -> str:
    """A short id no run listed here has (8 hex digits, like a short container id)."""
    while True:
        run_id = secrets.token_hex(4)
        if not (_runs_dir() / run_id).is_symlink():
            return run_id


def register(run_id: str, run_dir: Path, log_dir: Path | None) -> None:
    """List ``run_dir`` as run ``run_id`` and point ``<log_dir>/latest`` at it. A state
    directory that cannot be written only costs the listing (the run goes on)."""
    runs = _runs_dir()
    try:
        runs.mkdir(parents=True, exist_ok=True, mode=0o700)
        link = runs / run_id
        tmp = runs / f".{run_id}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.resolve())
        os.replace(tmp, link)
    except OSError:
        pass
    if log_dir is not None:
        point_latest(log_dir, run_dir)


def point_latest(log_dir: Path, run_dir: Path) -> None:
    """``<log_dir>/latest`` -> ``run_dir`` (relative when it is inside ``log_dir``)."""
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        target = run_dir.resolve()
        try:
            shown = target.relative_to(log_dir.resolve())
        except ValueError:
            shown = target
        tmp = log_dir / f".{LATEST}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(shown)
        os.replace(tmp, log_dir / LATEST)
    except OSError:
        pass


def entries() -> list[tuple[str, Path]]:
    """Every listed run: ``(id, run directory)``, dropping links to removed directories."""
    runs = _runs_dir()
    try:
        names = os.listdir(runs)
    except OSError:
        return []
    found = []
    for name in names:
        if name.startswith("."):
            continue
        link = runs / name
        try:
            target = Path(os.readlink(link))
        except OSError:
            continue
        if not target.is_dir():
            link.unlink(missing_ok=True)
            continue
        found.append((name, target))
    return found


def id_of(run_dir: Path) -> str | None:
    """The id ``run_dir`` is listed under (None: not listed): a run submitted as a job is
    listed before its launcher starts, which keeps that id."""
    target = run_dir.resolve()
    return next((run_id for run_id, listed in entries() if listed == target), None)


def forget(run_ids: list[str]) -> None:
    """Drop runs from the listing (their directories stay)."""
    for run_id in run_ids:
        (_runs_dir() / run_id).unlink(missing_ok=True)


def run_ids() -> list[str]:
    """The ids of every listed run, newest first (for tab completion)."""
    runs = _runs_dir()

    def listed_at(run_id: str) -> float:
        try:
            return (runs / run_id).lstat().st_mtime
        except OSError:
            return 0.0

    return sorted((name for name, _ in entries()), key=listed_at, reverse=True)
