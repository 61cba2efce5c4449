"""How an executable's attempt ended, in the words of the run's log and its failure."""

from __future__ import annotations

from topo.backends.base import ENDED_BY_TOPO
from topo.supervisor.state import signal_name


def ended(code: int, reason: str = "") -> str:
    """``killed by SIGKILL`` or ``exit code 1``, with ``reason`` after it if any."""
    text = f"killed by {signal_name(code)}" if code < 0 else f"exit code {code}"
    return text + (f" ({reason})" if reason else "")


def failure_cause(stuck: str, reason: str, traceback: str, code: int) -> tuple[str, str]:
    """(what happened, the traceback to show) of a failed attempt: stuck starting, the
    backend's reason, ended by topo (e.g. over its memory limit: no traceback), killed by
    a signal, raised, or exited with a code."""
    if stuck:
        return stuck, traceback
    if reason:
        return reason, traceback
    if traceback.startswith(ENDED_BY_TOPO):
        return traceback[len(ENDED_BY_TOPO) :].strip(), ""
    if code < 0:
        return f"was killed by {signal_name(code)}", traceback
    if traceback:
        return "raised an exception", traceback
    return f"exited with code {code}", traceback
