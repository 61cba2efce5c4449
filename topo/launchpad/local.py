"""What a ``local_*`` launch adds in a script: node output on the terminal, a wait for
the program when the script ends, Ctrl-C stopping it (exit 130), a failure exiting 1."""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from typing import Any

from topo.launchpad.failures import NodeFailure
from topo.launchpad.launched import Launched, running

_say_lock = threading.RLock()  # reentrant: the Ctrl-C handler may interrupt a write


def say(line: str, stream: Any = None) -> None:
    """Write one whole line (one write, under a lock: lines of the node threads, the
    launcher and the Ctrl-C handler never share a line)."""
    stream = sys.stdout if stream is None else stream
    with _say_lock:
        stream.write(line + "\n")
        stream.flush()


def prefix_width(program: Any) -> int:
    """The width of the node-name column of a program's terminal lines."""
    return min(24, max((len(n.id) for n in program.nodes), default=4))


class Printer:
    """Node output and failures on the terminal, for ``local_*`` launches (each line
    prefixed with its node); every line also goes to the run directory's logs."""

    def __init__(self, program: Any) -> None:
        self.width = prefix_width(program)

    def __call__(self, event: Any) -> None:
        if event.kind == "log" and event.node is not None:
            say(f"{event.node:<{self.width}} | {event.message}")
        elif event.kind == "failed" and event.message:
            say(f"{'topo':<{self.width}} | failed: {event.message}")
        elif event.kind == "stopping":
            say(f"{'topo':<{self.width}} | stopping: {event.message}")


def wait_at_exit(launched: Launched) -> None:
    """A ``local_*`` launch keeps the script alive until the program ends (Ctrl-C stops).
    A node failure that ended it is printed and the script exits with status 1."""

    def wait() -> None:
        try:
            launched.run.wait()
        except KeyboardInterrupt:
            width = prefix_width(launched.program)
            say(f"{'topo':<{width}} | Ctrl-C: stopping the program (Ctrl-C again kills it)")
            try:
                launched.run.stop()
            except KeyboardInterrupt:
                launched.run.kill()
                launched.run.wait(10)
            atexit._run_exitfuncs()  # the script's own exit handlers, then the status
            sys.stdout.flush()
            os._exit(130)  # what a shell expects after Ctrl-C; the program is stopped
        try:
            launched.raise_failure()
        except BaseException as exc:
            _exit_failed(launched, exc)

    register = getattr(threading, "_register_atexit", None)
    if register is not None:  # before daemon threads are stopped, like Launchpad
        register(wait)
    else:  # pragma: no cover
        atexit.register(wait)
    _stop_on_ctrl_c()


def _exit_failed(launched: Launched, exc: BaseException) -> None:
    """Report the failure that ended a local launch and end the script with status 1
    (the other exit handlers run first: the interpreter cannot be given a status later)."""
    cause = exc if isinstance(exc, NodeFailure) else exc.__cause__
    text = str(cause) if cause is not None else f"{type(exc).__name__}: {exc}"
    print(f"lp.launch: program {launched.program.name!r} failed -- {text}", file=sys.stderr)
    print(f"(logs: {launched.run.run_dir})", file=sys.stderr)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


_ctrl_c_installed = False


def _stop_on_ctrl_c() -> None:
    """Ctrl-C at any point of the script stops its local launches (else a Ctrl-C before
    the script's end would leave the at-exit wait waiting on a running program); the
    previous handler still runs (``KeyboardInterrupt``)."""
    global _ctrl_c_installed
    if threading.current_thread() is not threading.main_thread() or _ctrl_c_installed:
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # SIGINT ignored, as for a background job: leave it
        return
    _ctrl_c_installed = True

    def on_sigint(signum: int, frame: Any) -> Any:
        _end_echoed_line()
        for launched in running():
            launched.run.launcher.request_stop("interrupted (Ctrl-C)")
        return previous(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)


def _end_echoed_line() -> None:
    """A terminal echoes Ctrl-C as ``^C`` without a newline: end that line, so the next
    message (ours, or Python's KeyboardInterrupt) starts a line of its own. The
    interpreter's own streams: on threads, ``sys.stdout`` routes node output."""
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None and stream.isatty():
                say("", stream)
                return
        except ValueError:  # a closed stream
            continue
