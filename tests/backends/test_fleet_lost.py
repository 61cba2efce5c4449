"""A lost host's attempts in the remote core: those that ran count as killed (their
restart policy applies), those that never ran there start elsewhere as if not tried."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from topo.backends.remote.fleet import Fleet
from topo.backends.remote.records import RemoteRunner


class Ends:
    """A sink that notes each attempt's end and whether it ran."""

    def __init__(self) -> None:
        self.ran: dict[tuple[str, int], bool] = {}

    def exited(
        self, exe: str, attempt: int, pid: int, code: int, reason: str = "", started: bool = True
    ) -> None:
        self.ran[(exe, attempt)] = started


class Hosts:
    """A transport of named hosts that does nothing."""

    fleet: Any = None

    def drop(self, host: str) -> None:
        pass

    def where(self, host: str) -> str:
        return f"host {host}"


def test_an_attempt_sent_but_not_yet_started_on_a_lost_host_never_ran(tmp_path: Path) -> None:
    """Seen on Ray: a node lost with its fork server was restarted on the same Ray node,
    which Ray then declared dead before the restart started; counted as a second failure,
    the node was given up at max_restarts 1."""
    ends = Ends()
    fleet = Fleet(cast(Any, SimpleNamespace(run_dir=tmp_path)), cast(Any, ends), cast(Any, Hosts()))
    running = RemoteRunner(fleet, "a", 0, tmp_path / "a.log")
    running.host, running.pid = "h1", 4242
    sent = RemoteRunner(fleet, "b", 1, tmp_path / "b.log")
    sent.host = "h1"  # sent to the agent there; it never said it started (pid 0)
    elsewhere = RemoteRunner(fleet, "c", 0, tmp_path / "c.log")
    elsewhere.host, elsewhere.pid = "h2", 99
    for r in (running, sent, elsewhere):
        fleet._runners[(r.exe, r.attempt)] = r
    fleet.lose_host("h1", "its node was declared dead")
    assert ends.ran == {("a", 0): True, ("b", 1): False}
