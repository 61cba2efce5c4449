"""Waiting in tests on the condition they need, never for a fixed time: one poll helper
(``wait_until``), a listener that wakes its waiters on each event (``Events``), the
lines of a process's output as they come (``Lines``) or up to a line (``read_until``),
a file's text (``wait_for_text``), and the checks by pid that nothing a run started is
left (``alive``, ``wait_gone``).

Standard library and psutil only: a node process that imports ``topo.testing.nodes``
imports this package too.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from topo.backends.base import Event

T = TypeVar("T")
POLL_S = 0.05  # how often a condition without an event to wake on is looked at again


def wait_until(
    condition: Callable[[], T | None],
    timeout: float = 30.0,
    *,
    what: str = "",
    errors: tuple[type[BaseException], ...] = (),
    every: float = POLL_S,
) -> T:
    """``condition()``'s first true value, looked at every ``every`` seconds; after
    ``timeout`` an ``AssertionError`` says ``what`` was waited for and the last value
    seen. An exception of ``errors`` counts as "not yet" (a node that is restarting)."""
    end = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = condition()
        except errors as exc:
            value, last = None, exc  # type: ignore[assignment]
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= end:
            name = what or getattr(condition, "__name__", repr(condition))
            raise AssertionError(
                f"timed out after {timeout:g}s waiting for {name} (last: {last!r})"
            )
        time.sleep(every)


class Events:
    """A listener for ``topo.launch(..., listeners=[events])``: keeps every event of the
    run and wakes whoever waits for one (``wait_for``) as it arrives."""

    def __init__(self) -> None:
        self.seen: list[Event] = []
        self._cond = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self._cond:
            self.seen.append(event)
            self._cond.notify_all()

    def matching(self, kind: str, node: str | None = None, text: str = "") -> list[Event]:
        """The events so far of ``kind`` (of ``node``, whose message holds ``text``)."""
        with self._cond:
            return [
                e
                for e in self.seen
                if e.kind == kind and (node is None or e.node == node) and text in e.message
            ]

    def wait_for(
        self, kind: str, node: str | None = None, text: str = "", timeout: float = 30.0
    ) -> Event:
        """The first event of ``kind`` (of ``node``, whose message holds ``text``), once
        it has come; ``AssertionError`` after ``timeout``."""
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                found = self.matching(kind, node, text)
                if found:
                    return found[0]
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"no {kind} event{f' of {node}' if node else ''}"
                        f"{f' saying {text!r}' if text else ''} within {timeout:g}s"
                    )
                self._cond.wait(left)

    def lines(self, node: str) -> list[str]:
        """The log lines of ``node`` the launcher relayed."""
        return [e.message for e in self.matching("log", node)]


class Lines:
    """The lines of a text stream (a subprocess's piped output), read by a thread as they
    come and kept; ``wait_for`` wakes on the line a test waits for, without a poll."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self.closed = False
        self._next = 0  # where the next wait_for looks from: a line matches one wait only
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                with self._cond:
                    self.seen.append(line)
                    self._cond.notify_all()
        except (OSError, ValueError):  # the pipe closed under the reader
            pass
        finally:
            with self._cond:
                self.closed = True
                self._cond.notify_all()

    def text(self) -> str:
        """Everything read so far."""
        with self._cond:
            return "".join(self.seen)

    def wait_for(self, match: str | Callable[[str], bool], timeout: float = 30.0) -> str:
        """The first line (after those already matched) that holds ``match`` (or for which
        ``match(line)`` is true); ``AssertionError`` with the output after ``timeout`` or
        once the stream ended without one."""
        test = (lambda line: match in line) if isinstance(match, str) else match
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                for i in range(self._next, len(self.seen)):
                    if test(self.seen[i]):
                        self._next = i + 1
                        return self.seen[i]
                self._next = len(self.seen)
                left = end - time.monotonic()
                if self.closed or left <= 0:
                    why = "the output ended" if self.closed else f"{timeout:g}s passed"
                    raise AssertionError(
                        f"no line matching {match!r} ({why}); the output:\n{''.join(self.seen)}"
                    )
                self._cond.wait(left)

    def wait_closed(self, timeout: float = 30.0) -> str:
        """All the output, once the stream has ended."""
        self._thread.join(timeout)
        assert self.closed, f"the output did not end within {timeout:g}s:\n{self.text()}"
        return self.text()


def read_until(proc: subprocess.Popen[str], match: str, timeout: float = 60.0) -> list[str]:
    """The lines of ``proc``'s piped output up to the first one that holds ``match``,
    read in this thread (what follows stays in the pipe for ``communicate``). Past
    ``timeout`` the process is asked to stop (SIGTERM: a run stops its nodes), so a run
    that never says ``match`` fails the test with its output instead of hanging it."""
    assert proc.stdout is not None, "read_until needs stdout=subprocess.PIPE"
    stopped = threading.Event()

    def stop() -> None:
        stopped.set()
        proc.terminate()

    timer = threading.Timer(timeout, stop)
    timer.daemon = True
    timer.start()
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if match in line:
                return lines
    finally:
        timer.cancel()
    why = f"{timeout:g}s passed: the process was stopped" if stopped.is_set() else "it ended"
    raise AssertionError(f"no line holding {match!r} ({why}); the output:\n{''.join(lines)}")


def wait_for_text(path: Path, text: str = "", timeout: float = 30.0) -> str:
    """The text of the file at ``path`` once it holds ``text`` (or, without one, once it
    exists and is not empty)."""

    def holds() -> str | None:
        try:
            found = path.read_text(errors="replace")
        except FileNotFoundError:
            return None
        return found if found and text in found else None

    return wait_until(holds, timeout, what=f"{text!r} in {path}" if text else f"{path}")


def alive(pids: Iterable[int]) -> list[int]:
    """The pids that still belong to a live (non-zombie) process."""
    import psutil

    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def wait_gone(pids: Iterable[int], timeout: float) -> list[int]:
    """Wait until every pid is gone; the ones still alive after ``timeout``."""
    left = alive(pids)
    if left:
        try:
            wait_until(lambda: not alive(left), timeout, what="the processes to end")
        except AssertionError:
            return alive(left)
    return []
