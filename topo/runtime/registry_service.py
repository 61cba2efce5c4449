"""What the program registry serves: the address book, the stop channel, node status
(``report``), metric rows (``metrics``), the nodes' server keys, and the members of the
groups a node holds whole (``members``, kept current while ``topo apply`` changes them).

It knows which executable calls it (``rights.caller()``, from the member key the
executable proved in the handshake): an executable may register, unregister and report
only the nodes it runs, and send metrics only about them; looking nodes up and stopping
the program are open to every member.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from topo.runtime.addressbook import InProcessAddressBook
from topo.runtime.errors import PermissionDenied
from topo.runtime.rights import LAUNCHER, Authority, caller

log = logging.getLogger("topo.runtime.registry")
# on_report(kind, node, exe, attempt, pid, traceback): kind is ready / finished / failed
ReportHandler = Callable[[str, str, str, int, int, str], None]
# on_metrics(rows, over): at most MAX_METRIC_ROWS rows as sent (the handler checks each
# one), and how many more the call had (dropped here)
MetricsHandler = Callable[[list[Any], int], None]
# states(node_id): the pickled state a node is to start from (a snapshot's), or None
StatesHandler = Callable[[str], bytes | None]
MAX_METRIC_ROWS = 1000  # rows taken from one ``metrics`` call; the rest are dropped


def entry_owner(entry: str) -> str:
    """The node an address book entry belongs to: ``NODE`` for ``NODE`` and ``NODE@WHAT``
    (node ids have no ``@``)."""
    return str(entry).split("@", 1)[0]


class RegistryService(InProcessAddressBook):
    """What the registry serves: the address book, the stop channel, ``report`` and
    ``metrics``."""

    def __init__(
        self,
        on_stop: Callable[[str, str | None], None],
        on_report: ReportHandler | None,
        on_metrics: MetricsHandler | None = None,
        authority: Authority | None = None,
        states: StatesHandler | None = None,
    ) -> None:
        super().__init__(on_stop=on_stop)
        self.states = states
        self._authority = authority
        self._on_report = on_report
        self._on_metrics = on_metrics
        self.missed: dict[str, float] = {}  # node id -> last time a lookup found no address
        # Membership (topo apply): the generation, group -> (node, kind, call timeout) of
        # its members, member (executable) -> the groups its nodes hold whole, and the
        # generation each member last fetched (the launcher waits for it).
        self.generation = 0
        self._groups: dict[str, tuple[tuple[str, str, float | None], ...]] = {}
        self._holders: dict[str, frozenset[str]] = {}
        self.fetched: dict[str, int] = {}
        self.ending: set[str] = set()  # members asked to end their nodes (not the program)

    def _check(self, node_id: str, what: str) -> None:
        """Refuse ``what`` unless the calling executable runs the node that ``node_id``
        (a node id or a ``NODE@WHAT`` note) belongs to."""
        authority = self._authority
        if authority is None:
            return
        member = caller()
        if not authority.acts_for(member, entry_owner(node_id)):
            raise PermissionDenied(
                member or "a caller the registry cannot name",
                str(node_id),
                f"the registry refused to {what} {node_id!r} for "
                f"{member or 'a caller it cannot name'!r}: it does not run that node",
            )

    def _launcher_only(self, what: str) -> None:
        """Refuse ``what`` to a program member calling over RPC: only the launcher (which
        calls this object in its own process, where no caller is set) may."""
        member = caller()
        if self._authority is not None and member and member != LAUNCHER:
            raise PermissionDenied(member, "__registry__", f"only the launcher may {what}")

    def forget(self, node_ids: list[str] | tuple[str, ...]) -> None:
        """Drop the addresses of ``node_ids`` (the launcher's side, when their process ended)."""
        self._launcher_only("make the registry forget addresses")
        super().forget(node_ids)

    def register(self, node_id: str, endpoint: str, max_message_bytes: int | None = None) -> None:
        """Publish the endpoint of ``node_id`` (only the executable that runs it may), or a
        note ``NODE@WHAT`` a node keeps across its restarts (a reverb node's doors)."""
        self._check(node_id, "register")
        super().register(node_id, endpoint, max_message_bytes)

    def unregister(self, node_id: str, endpoint: str) -> None:
        """Forget ``node_id`` at ``endpoint`` (only the executable that runs it may)."""
        self._check(node_id, "unregister")
        super().unregister(node_id, endpoint)

    def saved_state(self, node_id: str) -> bytes | None:
        """The state ``node_id`` is to start from (only its own executable may ask)."""
        self._check(node_id, "give the saved state of")
        return None if self.states is None else self.states(node_id)

    def server_key(self, node_id: str) -> str | None:
        """The CURVE public key ``node_id``'s server proves."""
        return None if self._authority is None else self._authority.server_public(str(node_id))

    def lookup(self, node_id: str, timeout: float | None = None) -> str | None:
        """The endpoint of ``node_id``; a miss is noted: some node is waiting for it."""
        endpoint = super().lookup(node_id)
        if endpoint is None:
            self.missed[str(node_id)] = time.monotonic()
        return endpoint

    def set_members(
        self,
        generation: int,
        groups: dict[str, tuple[tuple[str, str, float | None], ...]],
        holders: dict[str, frozenset[str]],
    ) -> None:
        """The launcher's side: the groups' members as of ``generation``, and which
        executable's nodes hold which groups whole (who may ask for whose members)."""
        self._launcher_only("change the program's groups")
        self._groups, self._holders = dict(groups), dict(holders)
        self.generation = generation

    def members(self) -> tuple[int, dict[str, list[tuple[str, str, str, float | None]]]]:
        """``(generation, {group: [(node, token, kind, call timeout), ...]})`` for the groups
        the calling executable's nodes hold whole (every group for the launcher): the
        tokens are the right to call the members, which the IR's edges gave it."""
        member = caller()
        authority = self._authority
        generation = self.generation
        if authority is None or member == LAUNCHER:
            allowed: Iterable[str] = self._groups
        else:
            allowed = self._holders.get(member, frozenset())
        out = {
            g: [(n, authority.token(n) if authority else "", k, t) for n, k, t in self._groups[g]]
            for g in allowed
            if g in self._groups
        }
        self.fetched[member] = max(self.fetched.get(member, 0), generation)
        return generation, out

    def membership(self) -> int:
        """The current membership generation (0: never changed)."""
        return self.generation

    def ends(self) -> bool:
        """Whether the calling executable was asked to end its nodes (``topo apply``
        removes or restarts it), for a process that subscribed after the announcement."""
        return caller() in self.ending

    def report(
        self, kind: str, node: str, exe: str, attempt: int, pid: int, traceback: str = ""
    ) -> None:
        """A node's status, from inside its executable, for the launcher."""
        self._check(node, "take a report about")
        member = caller()
        if self._authority is not None and member != str(exe) and member != LAUNCHER:
            raise PermissionDenied(member, str(node), f"{member!r} may not report for {exe!r}")
        if self._on_report is not None:
            self._on_report(str(kind), str(node), str(exe), int(attempt), int(pid), str(traceback))

    def metrics(self, rows: Any) -> None:
        """Metric rows from a node's process; at most ``MAX_METRIC_ROWS`` per call are
        passed on (the handler checks each row), the number of the others with them."""
        if not isinstance(rows, list):
            rows = [rows]  # the handler drops (and counts) what is not a row
        authority, member = self._authority, caller()
        if authority is not None:  # a row about a node the caller does not run is dropped
            rows = [_foreign(r, member) if _is_foreign(authority, member, r) else r for r in rows]
        over = max(len(rows) - MAX_METRIC_ROWS, 0)
        if self._on_metrics is not None and rows:
            self._on_metrics(rows[:MAX_METRIC_ROWS], over)


def _is_foreign(authority: Authority, member: str, row: Any) -> bool:
    return isinstance(row, dict) and not authority.acts_for(member, str(row.get("node")))


def _foreign(row: dict[str, Any], member: str) -> dict[str, Any]:
    """The row with its node renamed: the store drops it (and counts it) as it drops a
    row about no node of the program, and its warning says why."""
    node = f"{row.get('node')!r} (sent by {member or 'an unnamed caller'!r}, which does not run it)"
    return {**row, "node": node}
