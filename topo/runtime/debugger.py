"""``breakpoint()`` in a node: the node stops there under a pdb whose input and output
are lines held in its process, and ``topo debug`` drives it through the launcher.

The hook (``sys.breakpointhook``, installed where nodes run) finds the calling thread's
node; outside a node it does what Python's own hook would. In a node it tells the
launcher where the node stopped (a row labelled ``DEBUG_LABEL`` on the metrics channel:
the live view, ``topo status`` and ``topo ps`` show ``at breakpoint (file:line)``, and
stall detection leaves the node alone), then runs pdb on the node's thread. The session
is reached only through the node's state door, which answers the launcher alone (an
authenticated call, never a port of its own): ``read`` takes the output pdb wrote,
waiting for its prompt; ``write`` gives it one line. ``continue`` lets the node go on
and the launcher hears it; ``quit`` does the same (a debugger does not end a node). A
client that goes away leaves the node stopped where it is; the program's stop lets it go
on (to stop as it would, not to be killed at the grace)."""

from __future__ import annotations

import os
import pdb
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from topo.runtime import metrics
from topo.runtime.context import current_node_info, maybe_current_program

DEBUG_LABEL = "topo.debug"
PROMPT = "(Pdb) "
RAYS = "ray.util.rpdb."  # what Ray sets PYTHONBREAKPOINT to in its workers
MAX_LINE = 4096


class Session:
    """One node's pdb at a breakpoint: its input lines and its output so far."""

    def __init__(self, node: str, at: str) -> None:
        self.node = node
        self.at = at
        self.active = True
        self._lines: queue.Queue[str] = queue.Queue()
        self._out: list[str] = []
        self._changed = threading.Condition()
        self.waiting = False  # pdb waits for a line (its prompt shown)
        self.where: Callable[[], str] = lambda: ""  # its place and prompt again (NodePdb's)

    # pdb's side
    def readline(self) -> str:
        self.waiting = True
        line = self._lines.get()
        self.waiting = False
        return line

    def write(self, text: str) -> int:
        with self._changed:
            self._out.append(text)
            self._changed.notify_all()
        return len(text)

    def flush(self) -> None:
        pass

    def end(self) -> None:
        with self._changed:
            self.active = False
            self._changed.notify_all()

    # the launcher's side (the state door)
    def read(self, wait_s: float, again: bool = False) -> dict[str, Any]:
        """The output since the last read, once pdb waits at its prompt (or went on, or
        ``wait_s`` passed); ``again`` (a client attaching): where pdb waits and its prompt,
        when an earlier client took them."""
        deadline = time.monotonic() + max(0.0, min(wait_s, 30.0))
        with self._changed:
            if again and self.waiting and not self._out:
                self._out.append(self.where())
            while self.active and not "".join(self._out).endswith(PROMPT):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            text, self._out = "".join(self._out), []
        return {"active": self.active, "at": self.at, "output": text}

    def give(self, line: str) -> None:
        self._lines.put(line[:MAX_LINE].replace("\n", " ") + "\n")


class NodePdb(pdb.Pdb):
    """pdb on a node's ``Session``: its ``continue`` and ``quit`` let the node go on."""

    def __init__(self, session: Session, gone: Callable[[], None]) -> None:
        super().__init__(stdin=session, stdout=session, nosigint=True)  # type: ignore[arg-type]
        self.use_rawinput = False
        self.prompt = PROMPT
        self._session = session
        self._gone = gone
        session.where = self._where

    def _where(self) -> str:
        """Where pdb stopped, as it says it when it stops there, and its prompt."""
        try:
            entry = self.format_stack_entry(self.stack[self.curindex], "\n-> ")
        except (AttributeError, IndexError):  # (not stopped yet)
            return ""
        return f"> {entry}\n{PROMPT}"

    def set_continue(self) -> None:
        super().set_continue()
        if not self.breaks:  # (with pdb breakpoints set, it stops again: still reachable)
            self._gone()

    def do_quit(self, arg: str) -> bool | None:
        self.message(f"topo: {self._session.node} goes on (quit ends no node: continue)")
        return self.do_continue(arg)

    do_q = do_exit = do_EOF = do_quit


_sessions: dict[str, Session] = {}
_lock = threading.Lock()
_previous: Callable[..., Any] | None = None


def install() -> None:
    """``breakpoint()`` stops the calling node under ``topo debug`` (idempotent; a
    ``PYTHONBREAKPOINT`` the user set is kept, not the one Ray sets in its workers,
    whose debugger ``topo debug`` replaces)."""
    global _previous
    chosen = os.environ.get("PYTHONBREAKPOINT", "")
    if chosen.startswith(RAYS):
        del os.environ["PYTHONBREAKPOINT"]  # (Python reads it at each breakpoint())
        chosen = ""
    if chosen or sys.breakpointhook is hook:
        return
    _previous = sys.breakpointhook
    sys.breakpointhook = hook


def hook(*args: Any, **kwargs: Any) -> Any:
    """``breakpoint()``: in a node, stop it here for ``topo debug``; elsewhere, Python's."""
    node = current_node_info()
    program = maybe_current_program()
    if node is None or program is None:
        return (_previous or sys.__breakpointhook__)(*args, **kwargs)
    frame = sys._getframe(1)
    at = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
    session = Session(node.id, at)
    with _lock:
        _sessions[node.id] = session
    book = program.address_book

    def gone() -> None:
        with _lock:
            if _sessions.get(node.id) is session:
                del _sessions[node.id]
        session.end()
        _tell(book, node.id, None)

    _tell(book, node.id, at)
    stop = getattr(program, "stop_event", None)
    if stop is not None:
        threading.Thread(
            target=_go_on_at_stop, args=(session, stop), name="topo-debug-stop", daemon=True
        ).start()
    NodePdb(session, gone).set_trace(frame)
    return None


def _go_on_at_stop(session: Session, stop: threading.Event) -> None:
    """The program stops: a node left at its breakpoint goes on, to stop as it would
    (it is not killed at the grace for a session nobody closed)."""
    while session.active:
        if stop.wait(0.5):
            if session.active:
                session.write("\ntopo: the program stops: continue\n")
                session.give("continue")
            return


def _tell(book: Any, node: str, at: str | None) -> None:
    """Tell the launcher where ``node`` stopped (None: it goes on)."""
    try:
        metrics.ship(book, {"time": time.time(), "node": node, "label": DEBUG_LABEL, "at": at})
    except Exception:  # the launcher shows it late or not at all; the session still works
        pass


def door(
    node: str, action: str, text: str = "", wait_s: float = 1.0, again: bool = False
) -> dict[str, Any]:
    """The state door's ``debug`` call: ``read`` the session's output (waiting up to
    ``wait_s`` for its prompt; ``again``: a client attaching) or ``write`` one line to
    it. A node at no breakpoint answers ``active`` False."""
    with _lock:
        session = _sessions.get(node)
    if session is None:
        return {"active": False, "at": None, "output": ""}
    if action == "write":
        session.give(str(text))
        return {"active": session.active, "at": session.at, "output": ""}
    return session.read(float(wait_s), bool(again))
