"""What a run leaves behind, and clearing it: the node processes a lost run left running
and its backend's helpers (a fork server; each checked by its pid *and* start time
before every signal: never a reused pid), the
directories it made in the temporary directory (its sockets: ``topo-<random>``, its
control channel: ``topo-ctl-<random>``), its record, its listing and its run directory.

``topo stop`` of a lost run calls ``end_lost``; ``topo rm`` and ``topo prune`` call
``remove``. Only the standard library, like the rest of ``topo.runs``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topo.runs import index
from topo.rundir.layout import STATUS_FILE
from topo.rundir.status import write_status
from topo.runs.probe import ORPHANED_NODE, RunInfo, node_alive

LOST_REASON = "lost: its launcher (pid {pid}) ended without ending the run"


@dataclass
class Cleared:
    """What clearing a run did: node processes ended (node id, pid), directories
    removed, bytes freed, and what could not be done."""

    ended: list[tuple[str, int]] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    freed: int = 0
    problems: list[str] = field(default_factory=list)
    refused: str = ""  # why nothing of the run was removed

    def add(self, other: Cleared) -> None:
        """Count ``other`` in too."""
        self.ended += other.ended
        self.removed += other.removed
        self.freed += other.freed
        self.problems += other.problems
        if other.refused:
            self.problems.append(other.refused)


def temp_dirs(status: dict[str, Any]) -> list[Path]:
    """The directories the run made under the temporary directory, as its record names
    them (its sockets' and its control channel's), that still exist and are this user's,
    private, and named as topo names them: nothing else is ever removed."""
    named = [status.get("socket_dir")]
    control = status.get("control")
    if isinstance(control, str):
        named.append(os.path.dirname(control))
    bases = {os.path.realpath(tempfile.gettempdir()), "/tmp"}
    found = []
    for path in named:
        if not isinstance(path, str) or not os.path.isabs(path):
            continue
        if not os.path.basename(path).startswith("topo-"):
            continue
        if os.path.realpath(os.path.dirname(path)) not in bases:
            continue
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077:
            found.append(Path(path))
    return found


def _size(path: Path) -> int:
    """Bytes of the files under ``path`` (links not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _remove_tree(path: Path, cleared: Cleared) -> None:
    size = _size(path)
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        cleared.problems.append(f"could not remove {path}: {exc.strerror or exc}")
        return
    cleared.removed.append(path)
    cleared.freed += size


def _signal(entry: dict[str, Any], signum: int) -> bool:
    """Send ``signum`` to the node's process (and its process group, which it leads on
    procs) if it is still the very process recorded; whether it was."""
    pid = int(entry["pid"])
    if node_alive(entry) is not True:
        return False
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def end_orphans(orphans: list[dict[str, Any]], grace_s: float, kill: bool) -> Cleared:
    """End the node processes of a lost run that still run: SIGTERM, up to ``grace_s``
    to end, then SIGKILL (``kill``: SIGKILL at once). Each is checked by pid and start
    time before every signal."""
    cleared = Cleared()
    signalled = [e for e in orphans if _signal(e, signal.SIGKILL if kill else signal.SIGTERM)]
    end = time.monotonic() + (0.0 if kill else grace_s)
    while not kill and time.monotonic() < end and any(node_alive(e) for e in signalled):
        time.sleep(0.05)
    for entry in signalled:
        if node_alive(entry):
            _signal(entry, signal.SIGKILL)
    end = time.monotonic() + 5.0
    while time.monotonic() < end and any(node_alive(e) for e in signalled):
        time.sleep(0.05)
    for entry in signalled:
        if node_alive(entry):
            cleared.problems.append(f"node {entry['id']} (pid {entry['pid']}) did not end")
        else:
            cleared.ended.append((str(entry["id"]), int(entry["pid"])))
    return cleared


def end_lost(info: RunInfo, grace_s: float | None, kill: bool, by: str) -> Cleared:
    """Clear what a lost run left: its orphaned nodes (see ``end_orphans``; the grace is
    ``grace_s``, else the run's), its temporary directories; then its record says it ended,
    lost (no exit code)."""
    status = info.status
    grace = grace_s if grace_s is not None else float(status.get("grace_s") or 5.0)
    orphans = [n for n in status.get("nodes") or [] if n.get("state") == ORPHANED_NODE]
    helpers = [
        {**h, "id": "the backend's helper"}
        for h in status.get("helpers") or []
        if isinstance(h, dict) and node_alive(h)
    ]
    cleared = end_orphans([*orphans, *helpers], grace, kill)
    for path in temp_dirs(status):
        _remove_tree(path, cleared)
    ended = {node for node, _pid in cleared.ended}
    nodes = [
        {**n, "state": "killed"} if n.get("id") in ended else n for n in status.get("nodes") or []
    ]
    record = {
        **status,
        "state": "ended",
        "exit_code": None,
        "stop_reason": LOST_REASON.format(pid=info.pid),
        "lost": {"cleared_at": time.time(), "by": by, "ended": dict(cleared.ended)},
        "nodes": nodes,
    }
    try:
        write_status(info.run_dir, record)
    except OSError as exc:
        cleared.problems.append(f"could not write {info.run_dir / STATUS_FILE}: {exc}")
    return cleared


def remove(info: RunInfo, keep_dir: bool = False) -> Cleared:
    """Remove an ended run (or a lost one ``end_lost`` cleared): its listing, the
    directories it left in the temporary directory, and unless ``keep_dir`` its run
    directory (with ``latest`` beside it when it points there)."""
    cleared = Cleared()
    why_not = "" if keep_dir else _not_removable(info.run_dir)
    if why_not:  # nothing of it is removed
        cleared.refused = f"{info.run_dir} is not removed: {why_not} (--keep-dir keeps it)"
        return cleared
    for path in temp_dirs(info.status):
        _remove_tree(path, cleared)
    index.forget([info.id])
    if keep_dir:
        return cleared
    latest = info.run_dir.parent / index.LATEST
    try:
        if latest.is_symlink() and latest.resolve() == info.run_dir.resolve():
            latest.unlink()
    except OSError:
        pass
    _remove_tree(info.run_dir, cleared)
    return cleared


def _not_removable(run_dir: Path) -> str:
    """Why ``run_dir`` must not be removed whole ("" when it may): a run directory holds
    the run's record, and is never a directory above the working one or the home (a run
    started with ``--run-dir ~`` ...)."""
    target = run_dir.resolve()
    if not (target / STATUS_FILE).is_file():
        return f"it holds no {STATUS_FILE}"
    guarded = [Path.cwd().resolve()]
    try:
        guarded.append(Path.home().resolve())
    except RuntimeError:  # no home directory known
        pass
    for place in guarded:
        if target == place or target in place.parents:
            return "it is (or holds) the working or the home directory"
    return ""


def listed_here(info: RunInfo) -> bool:
    """Whether the run is in this user's listing (``$TOPO_HOME``): the only runs ``topo rm``
    and ``topo prune`` remove."""
    target = info.run_dir.resolve()
    return any(d.resolve() == target for _i, d in index.entries())
