"""Writing a run directory's files: making it, node output routed to each node's log,
output from elsewhere appended, marker lines, and waiting for a log to be written.

The names and the layout are ``topo.rundir``'s (``layout``: which file is where;
``lines``: the timestamp every line starts with and the launcher's marker lines). The
live view follows the files with ``topo.backends.tail``.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from topo.backends.rotation import LogLimit, RotatingFile, append_capped
from topo.diagnostics import TopoError
from topo.ir import Program, dumps
from topo.rundir.layout import (
    LOGS_DIR,
    PROGRAM_FILE,
    TOPOLOGY_FILE,
    exe_output_path,
    fresh_run_dir,
    log_path,
)
from topo.rundir.lines import marker_line, timestamp
from topo.runtime.context import current_node_info, maybe_current_program

if TYPE_CHECKING:  # a node's process does not import it
    from topo.rundir.record import RunRecord


def append_output(
    run_dir: Path, program: Program, label: str, text: str, limit: LogLimit | None = None
) -> None:
    """Output gathered from elsewhere (another host, a Ray actor) appended to the run
    directory's log of ``label``: a node, or an executable of several nodes (rotated
    past ``limit``)."""
    if label in program.executable_index and label not in program.node_index:
        path = exe_output_path(run_dir, program.executable_index[label])
    else:
        path = log_path(run_dir, label)
    append_capped(path, text.encode("utf-8", "replace"), limit)


def make_run_dir(
    program: Program,
    log_dir: Path,
    run_dir: Path | None,
    topology_yaml: str | None,
    record: RunRecord | None = None,
) -> Path:
    """Create the run directory with program.json, topology.yaml, run.json and empty log
    files."""
    from topo.rundir.record import write_record

    if run_dir is None:
        run_dir = fresh_run_dir(log_dir, program.name)
    try:
        # Private to the user who runs topo: logs and the resolved config may hold secrets.
        run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        run_dir.chmod(0o700)
        (run_dir / LOGS_DIR).mkdir(exist_ok=True, mode=0o700)
        _write_private(run_dir / PROGRAM_FILE, dumps(program) + "\n")
        if topology_yaml is not None:
            _write_private(run_dir / TOPOLOGY_FILE, topology_yaml)
        if record is not None:
            write_record(run_dir, record)
        for node in program.nodes:
            log_path(run_dir, node.id).touch(mode=0o600)
    except OSError as exc:
        raise TopoError.one(
            f"cannot make the run directory {run_dir}: {exc.strerror or exc}",
            hint="choose another place with --log-dir or --run-dir",
        ) from None
    for exe in program.executables:
        if len(exe.nodes) > 1:
            log_path(run_dir, exe.id).touch(mode=0o600)
    return run_dir.resolve()


def write_program(run_dir: Path, program: Program) -> None:
    """Rewrite the run's ``program.json`` at once (``topo apply`` changed the program)."""
    tmp = run_dir / f".{PROGRAM_FILE}.tmp"
    _write_private(tmp, dumps(program) + "\n")
    os.replace(tmp, run_dir / PROGRAM_FILE)


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable by the user only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def write_marker(path: Path, text: str) -> None:
    """Append ``<timestamp> ── topo: <text> ──`` to a log file in one write, on a line of
    its own: a process killed in the middle of a line left no newline after it."""
    line = marker_line(text).encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        os.write(fd, line)
    finally:
        os.close(fd)


class Stamped(io.TextIOBase):
    """A text stream that starts every line written to ``stream`` with a timestamp;
    ``written(n)`` is told how much went out (a log cap's size check)."""

    def __init__(self, stream: TextIO, written: Callable[[int], None] | None = None) -> None:
        self.stream = stream
        self._written = written
        self._at_start = True
        self._lock = threading.Lock()

    def write(self, s: str) -> int:
        if not s:
            return 0
        with self._lock:
            parts = s.split("\n")
            out = []
            stamp = timestamp() + " "
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                if self._at_start and (part or not last):
                    out.append(stamp)
                out.append(part if last else part + "\n")
                self._at_start = not last
            self._at_start = parts[-1] == ""
            text = "".join(out)
            self.stream.write(text)
            if self._written is not None:
                self._written(len(text))
        return len(s)

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        self.stream.close()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.stream, "errors", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class NodeRouter(io.TextIOBase):
    """A ``sys.stdout``/``sys.stderr`` stand-in that sends each write to the log file of
    the node the writing thread runs as (falls back to the stream it replaced)."""

    def __init__(self, fallback: TextIO) -> None:
        self.fallback = fallback
        self.files: dict[tuple[str, str], TextIO] = {}

    def _target(self) -> TextIO:
        if self.files:
            node = current_node_info()
            program = maybe_current_program()
            if node is not None and program is not None:
                f = self.files.get((program.program_id, node.id))
                if f is not None:
                    return f
        return self.fallback

    def write(self, s: str) -> int:
        target = self._target()
        target.write(s)
        if target is not self.fallback and "\n" in s:
            target.flush()
        return len(s)

    def flush(self) -> None:
        self.fallback.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.fallback.fileno()

    @property
    def rich_proxied_file(self) -> Any:
        """Where a rich console that resolves ``sys.stdout`` at each write really writes.

        When this router replaced a rich ``Live`` proxy (which hands writes to a console),
        such a console must write to the proxy's real file: through the router it would
        reach the proxy, which hands it back to the console, and so on forever."""
        return getattr(self.fallback, "rich_proxied_file", self)


_routers: tuple[NodeRouter, NodeRouter] | None = None
_router_users = 0
_router_lock = threading.Lock()
_unrouted: set[tuple[str, str]] = set()  # (program, node) whose output was routed here, then not


def output_gone() -> bool:
    """Whether the calling thread runs as a node whose output this process routed to its
    log and no longer does: a thread abandoned past its stop's grace (threads backend)
    that outlived its run. What it would print has nowhere to go: not the process's own
    output, which is someone else's by now (a notebook's, the next test's)."""
    node = current_node_info()
    program = maybe_current_program()
    return node is not None and program is not None and (program.program_id, node.id) in _unrouted


def route_node_output(
    program_id: str, files: dict[str, Path], limit: LogLimit | None = None, *, more: bool = False
) -> dict[str, TextIO]:
    """Route writes of these nodes' threads (``node id -> log file``) to their files,
    each rotated past ``limit`` (None: no cap). ``more``: nodes added to a program whose
    output is routed already (``topo apply``); undone with the first call's."""
    global _routers, _router_users
    import sys

    with _router_lock:
        if _routers is None:
            _routers = (NodeRouter(sys.stdout), NodeRouter(sys.stderr))
            sys.stdout, sys.stderr = _routers  # type: ignore[assignment]
        if not more:
            _router_users += 1
        opened: dict[str, TextIO] = {}
        for node_id, path in files.items():
            f: TextIO = Stamped(RotatingFile(path, limit))  # type: ignore[arg-type,assignment]
            opened[node_id] = f
            for r in _routers:
                r.files[(program_id, node_id)] = f
        return opened


def unroute_node_output(program_id: str, opened: dict[str, TextIO]) -> None:
    """Undo ``route_node_output`` (restores sys.stdout/stderr after the last user)."""
    global _routers, _router_users
    import sys

    with _router_lock:
        if _routers is None:
            return
        for node_id, f in opened.items():
            for r in _routers:
                r.files.pop((program_id, node_id), None)
            _unrouted.add((program_id, node_id))
            f.close()
        _router_users -= 1
        if _router_users <= 0:
            if sys.stdout is _routers[0]:
                sys.stdout = _routers[0].fallback
            if sys.stderr is _routers[1]:
                sys.stderr = _routers[1].fallback
            _routers, _router_users = None, 0


def file_size(path: Path | None) -> int:
    """The size of ``path`` in bytes (0 if it does not exist yet, -1 for no path)."""
    try:
        return -1 if path is None else path.stat().st_size
    except OSError:
        return 0


def wait_written(path: Path | None, before: int, limit_s: float = 5.0) -> None:
    """Wait until ``path`` has grown past ``before`` and stopped growing for a moment (a
    busy machine can take far longer than usual to schedule the signalled process)."""
    if path is None:
        time.sleep(0.3)
        return
    end = time.monotonic() + limit_s
    last = before
    quiet_since = None
    while time.monotonic() < end:
        size = file_size(path)
        if size != last:
            last, quiet_since = size, time.monotonic()
        elif size > before and quiet_since is not None and time.monotonic() - quiet_since > 0.1:
            return
        time.sleep(0.02)
