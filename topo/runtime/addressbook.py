"""The address book: ``node_id -> endpoint`` plus the program's stop signal.

``AddressBook`` is the small protocol every backend provides; this module has
the in-process implementation (threads backend, tests). The networked one is
``registry_client.RegistryClient``.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable


class AddressBook(ABC):
    """Where node servers register and clients resolve; also carries program stop."""

    @abstractmethod
    def register(self, node_id: str, endpoint: str, max_message_bytes: int | None = None) -> None:
        """Publish (or replace, after a restart) the endpoint of ``node_id`` and the
        largest request it accepts (callers check it before they send)."""

    @abstractmethod
    def unregister(self, node_id: str, endpoint: str) -> None:
        """Forget ``node_id`` if it is still registered at ``endpoint``."""

    @abstractmethod
    def lookup(self, node_id: str, timeout: float | None = None) -> str | None:
        """Current endpoint of ``node_id``, or None if it is not registered (no wait for
        it to be). ``timeout``: how long a networked book may take to answer (None: its
        call deadline); it raises past it."""

    def message_limit(self, node_id: str) -> int | None:
        """The largest request ``node_id`` accepts, in bytes (None: not known)."""
        return None

    def server_key(self, node_id: str) -> str | None:
        """The CURVE public key (Z85) ``node_id``'s server proves (None: not known)."""
        return None

    def saved_state(self, node_id: str) -> bytes | None:
        """The state ``node_id`` is to start from (a snapshot's), pickled; None: none."""
        return None

    @abstractmethod
    def request_stop(self, reason: str, node_id: str | None = None) -> None:
        """Ask the whole program to stop."""

    @property
    @abstractmethod
    def stop_event(self) -> threading.Event:
        """Set in this process once the program is stopping."""

    @abstractmethod
    def stop_reason(self) -> tuple[str, str | None] | None:
        """(reason, node id) of the stop request once one was made."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release sockets/threads held by this address book."""

    def wait_lookup(self, node_id: str, deadline: float) -> str | None:
        """Poll ``lookup`` with backoff until it answers, ``deadline`` (monotonic) or the
        program's stop: a peer not registered by then will not serve this stopping
        program (a caller waiting on to its deadline outlived the stop's grace)."""
        delay = 0.002
        stop = self.stop_event
        while True:
            endpoint = self.lookup(node_id)
            if endpoint is not None:
                return endpoint
            remaining = deadline - time.monotonic()
            if remaining <= 0 or stop.is_set():
                return None
            stop.wait(min(delay, remaining))
            delay = min(delay * 2, 0.1)


class InProcessAddressBook(AddressBook):
    """Address book held in this process's memory (threads backend, tests, and the
    state behind the networked registry). ``on_stop`` runs once, on the first stop."""

    def __init__(self, on_stop: Callable[[str, str | None], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, str] = {}
        self._limits: dict[str, int] = {}  # a node's limit outlives its registration
        self._stop = threading.Event()
        self._reason: tuple[str, str | None] | None = None
        self._on_stop = on_stop

    def register(self, node_id: str, endpoint: str, max_message_bytes: int | None = None) -> None:
        with self._lock:
            self._entries[node_id] = endpoint
            if max_message_bytes is not None:
                self._limits[node_id] = int(max_message_bytes)

    def unregister(self, node_id: str, endpoint: str) -> None:
        with self._lock:
            if self._entries.get(node_id) == endpoint:
                del self._entries[node_id]

    def lookup(self, node_id: str, timeout: float | None = None) -> str | None:
        return self._entries.get(node_id)

    def message_limit(self, node_id: str) -> int | None:
        return self._limits.get(node_id)

    def forget(self, node_ids: list[str] | tuple[str, ...]) -> None:
        """Drop these nodes' registrations whatever their endpoint (their process ended)."""
        with self._lock:
            for node_id in node_ids:
                self._entries.pop(node_id, None)

    def entries(self) -> dict[str, str]:
        """A copy of every registration."""
        with self._lock:
            return dict(self._entries)

    def request_stop(self, reason: str, node_id: str | None = None) -> None:
        with self._lock:
            first = self._reason is None
            if first:
                self._reason = (reason, node_id)
        self._stop.set()
        if first and self._on_stop is not None:
            self._on_stop(reason, node_id)

    @property
    def stop_event(self) -> threading.Event:
        return self._stop

    def stop_reason(self) -> tuple[str, str | None] | None:
        return self._reason
