"""Snapshots on disk: ``<run_dir>/snapshots/<n>/``, one state file per node and a manifest.

A snapshot is written in a hidden directory beside the others and renamed into place
in one step once every file and the manifest are on disk, so a snapshot cut short (the
launcher or a node killed half-way) is never seen and leaves the previous ones whole.
States are the bytes the nodes sent; they are stored and checked here, never unpickled
(only the node a state belongs to reads it back).

Standard library only: ``topo snapshot`` and ``topo run --resume`` read it quickly;
whether a snapshot fits a program is ``topo.snapshots.fit``'s to say.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topo.rundir.layout import MANIFEST_FILE, SNAPSHOTS_DIR
from topo.rundir.pids import pid_alive

FORMAT = 1
_NUMBERED = re.compile(r"^[0-9]+$")


class SnapshotError(Exception):
    """A snapshot that cannot be used: missing, damaged, or of another program."""


@dataclass(frozen=True)
class NodeState:
    """One node's entry in a manifest."""

    node: str
    file: str
    size: int
    sha256: str
    target: str = ""


@dataclass(frozen=True)
class Snapshot:
    """A complete snapshot on disk (its manifest read and checked)."""

    path: Path
    number: int
    program: str
    structure: str
    taken_at: float
    pause_s: float
    nodes: dict[str, NodeState]
    counts: dict[str, Any] = field(default_factory=dict)
    still_moving: dict[str, list[str]] = field(default_factory=dict)
    reason: str = ""

    @property
    def size(self) -> int:
        """Bytes of node state it holds."""
        return sum(n.size for n in self.nodes.values())

    def state(self, node_id: str) -> bytes | None:
        """The saved state of ``node_id`` (None: it had none), its checksum verified."""
        entry = self.nodes.get(node_id)
        if entry is None:
            return None
        path = self.path / entry.file
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SnapshotError(
                f"snapshot {self.path}: the state file of node {node_id!r} cannot be read "
                f"({exc.strerror or exc})"
            ) from None
        if len(data) != entry.size or hashlib.sha256(data).hexdigest() != entry.sha256:
            raise SnapshotError(
                f"snapshot {self.path}: the state file of node {node_id!r} ({entry.file}) is "
                f"damaged: {len(data)} bytes with another checksum than the manifest's "
                f"{entry.size} bytes"
            )
        return data

    def verify(self) -> None:
        """Read every state file once: raise ``SnapshotError`` for the first bad one."""
        for node_id in self.nodes:
            self.state(node_id)


def snapshots_dir(run_dir: Path) -> Path:
    """Where a run keeps its snapshots."""
    return Path(run_dir) / SNAPSHOTS_DIR


def _safe_name(node_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", node_id) + ".state"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def numbers(run_dir: Path) -> list[int]:
    """The numbers of the complete snapshots of a run, oldest first."""
    root = snapshots_dir(run_dir)
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        if _NUMBERED.match(entry.name) and (entry / MANIFEST_FILE).is_file():
            found.append(int(entry.name))
    return sorted(found)


def write_snapshot(
    run_dir: Path,
    states: Mapping[str, bytes],
    *,
    program: str,
    structure: str,
    pause_s: float,
    targets: Mapping[str, str] | None = None,
    counts: Mapping[str, Any] | None = None,
    still_moving: Mapping[str, list[str]] | None = None,
    reason: str = "",
    keep: int | None = None,
) -> Snapshot:
    """Write one snapshot atomically as the next number; then drop the oldest beyond
    ``keep``. Returns it as read back."""
    root = snapshots_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    done = numbers(run_dir)
    number = (done[-1] + 1) if done else 1
    scratch = root / f".part-{number}-{os.getpid()}-{time.monotonic_ns()}"
    scratch.mkdir()
    try:
        entries: dict[str, dict[str, Any]] = {}
        for node_id, data in sorted(states.items()):
            name = _safe_name(node_id)
            _write(scratch / name, data)
            entries[node_id] = {
                "file": name,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "target": (targets or {}).get(node_id, ""),
            }
        manifest = {
            "format": FORMAT,
            "number": number,
            "program": program,
            "structure": structure,
            "taken_at": time.time(),
            "pause_s": round(pause_s, 6),
            "reason": reason,
            "counts": dict(counts or {}),
            "still_moving": {k: list(v) for k, v in (still_moving or {}).items()},
            "nodes": entries,
        }
        _write(scratch / MANIFEST_FILE, json.dumps(manifest, indent=1, default=str).encode())
        _fsync_dir(scratch)
        final = root / str(number)
        os.rename(scratch, final)  # the one step that makes it a snapshot
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    if keep is not None and keep >= 1:
        prune(run_dir, keep)
    return read_snapshot(final)


def prune(run_dir: Path, keep: int) -> None:
    """Remove all but the newest ``keep`` snapshots, and parts left by cut-short ones."""
    root = snapshots_dir(run_dir)
    for number in numbers(run_dir)[:-keep]:
        shutil.rmtree(root / str(number), ignore_errors=True)
    for entry in root.iterdir() if root.is_dir() else []:
        if entry.name.startswith(".part-") and not _writer_alive(entry.name):
            shutil.rmtree(entry, ignore_errors=True)


def _writer_alive(name: str) -> bool:
    """Whether the process that was writing the part ``name`` still runs."""
    try:
        pid = int(name.split("-")[2])
    except (IndexError, ValueError):
        return False
    if pid == os.getpid():
        return True
    return pid_alive(pid)


def read_snapshot(path: Path) -> Snapshot:
    """Read the manifest of the snapshot in ``path``; ``SnapshotError`` if it is not one."""
    manifest_path = Path(path) / MANIFEST_FILE
    try:
        raw = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        raise SnapshotError(f"{path} is not a snapshot: it has no {MANIFEST_FILE}") from None
    except (OSError, ValueError) as exc:
        raise SnapshotError(
            f"snapshot {path}: its {MANIFEST_FILE} cannot be read ({exc})"
        ) from None
    try:
        if raw.get("format") != FORMAT:
            raise SnapshotError(
                f"snapshot {path}: format {raw.get('format')!r}, this topo reads {FORMAT}"
            )
        nodes = {
            node_id: NodeState(
                node_id,
                str(e["file"]),
                int(e["size"]),
                str(e["sha256"]),
                str(e.get("target", "")),
            )
            for node_id, e in raw["nodes"].items()
        }
        return Snapshot(
            Path(path),
            int(raw["number"]),
            str(raw["program"]),
            str(raw["structure"]),
            float(raw["taken_at"]),
            float(raw["pause_s"]),
            nodes,
            dict(raw.get("counts") or {}),
            {k: list(v) for k, v in (raw.get("still_moving") or {}).items()},
            str(raw.get("reason", "")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SnapshotError(
            f"snapshot {path}: its {MANIFEST_FILE} is incomplete ({exc!r})"
        ) from None


def latest(run_dir: Path) -> Snapshot | None:
    """The newest complete snapshot of a run, or None."""
    done = numbers(run_dir)
    return read_snapshot(snapshots_dir(run_dir) / str(done[-1])) if done else None


def find(run_dir: Path, number: int | None = None) -> Snapshot:
    """Snapshot ``number`` of a run (default: its newest), or a ``SnapshotError`` that
    says which there are."""
    done = numbers(run_dir)
    if not done:
        raise SnapshotError(f"run {run_dir} has no snapshot (no complete {SNAPSHOTS_DIR}/<n>/)")
    if number is None:
        number = done[-1]
    if number not in done:
        raise SnapshotError(
            f"run {run_dir} has no snapshot {number}; it has {', '.join(map(str, done))}"
        )
    return read_snapshot(snapshots_dir(run_dir) / str(number))


def human_size(n: float) -> str:
    """``512 B``, ``3.4 KiB``, ``12.0 MiB``, ``1.2 GiB``."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
