"""Launchpad's address objects (``lp.Address`` and its builders), for programs that make
their own servers. topo's own nodes never need them (the backend picks every node's port
and handles find their node by id); a launch on this machine binds the addresses assigned
to nodes to free local ports, as Launchpad's local launches do."""

from __future__ import annotations

import abc
import os
import re
import socket
from collections.abc import Iterable
from typing import Any

_NAME = re.compile("[a-z][a-z0-9]*")


class AbstractAddressBuilder(abc.ABC):
    """Makes the ``host:port`` text of an :class:`Address` when it is resolved."""

    @abc.abstractmethod
    def build(self) -> str:
        """The address, as ``host:port``."""


class SimpleLocalAddressBuilder(AbstractAddressBuilder):
    """``localhost:<port>``, the port one that was free when the builder was made."""

    def __init__(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("localhost", 0))
            port = sock.getsockname()[1]
        self._address = f"localhost:{port}"

    def build(self) -> str:
        """The address picked at construction (the same on every call)."""
        return self._address


class Address:
    """A network address known by the time a node runs: assigned to one node, bound to
    a builder, resolved to ``host:port`` inside the node.

    ``lp.launch`` on this machine (threads, processes) binds an unbound address of a
    node to a free local port; for other backends bind it yourself first."""

    def __init__(self, name: str | None = None) -> None:
        if name is not None and not _NAME.fullmatch(name):
            raise ValueError(
                f"Wrong address name: {name} does not match {_NAME.pattern}. "
                "(lower-case letters and digits, starting with a letter)"
            )
        self.name = name
        self._builder: AbstractAddressBuilder | None = None
        self._owner: Any = None

    def bind(self, address_builder: AbstractAddressBuilder) -> None:
        """Use ``address_builder`` to make the address when it is resolved."""
        self._builder = address_builder

    @property
    def is_bound(self) -> bool:
        """Whether a builder was bound (the address can be resolved)."""
        return self._builder is not None

    def resolve(self) -> str:
        """The address as ``host:port``; an error if no builder was bound."""
        if self._builder is None:
            owner = "not assigned to any node" if self._owner is None else f"of {self._owner}"
            raise RuntimeError(
                f"this lp.Address ({owner}) is not bound to an address builder: lp.launch "
                "binds the addresses of its nodes on this machine's backends (threads, "
                "procs); elsewhere, or for an address of no node, call "
                "address.bind(lp.SimpleLocalAddressBuilder()) (or your own builder) first"
            )
        return self._builder.build()

    def assign(self, node: Any) -> None:
        """Make ``node`` the owner of this address (once); it joins ``node.addresses``."""
        if self._owner is node:
            return
        if self._owner is not None:
            raise ValueError(
                "this lp.Address is already assigned to another node: "
                f"{self._owner} (now asked for {node})"
            )
        self._owner = node
        node.addresses.append(self)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if not isinstance(self._owner, str | None):  # the node stays behind; its name goes
            state["_owner"] = f"restored from a pickle of {self._owner!r}"
        return state

    def __repr__(self) -> str:
        return f"<lp.Address {self.name or ''}>".replace(" >", ">")


def bind_local_addresses(nodes: Iterable[Any]) -> None:
    """Bind every unbound address of ``nodes`` to a free local port (its own builder each),
    as Launchpad's local launches bind them before nodes run."""
    for node in nodes:
        for address in getattr(node, "addresses", ()):
            if isinstance(address, Address) and not address.is_bound:
                address.bind(SimpleLocalAddressBuilder())


def get_port_from_address(address: str) -> int:
    """The port of ``host:port``; for ``host:name`` (a named port) the value of the
    environment variable ``LP_PORT_<name>``, as Launchpad passes named ports."""
    port = address.split(":")[-1]
    if port.isdigit():
        return int(port)
    value = os.environ.get(f"LP_PORT_{port}")
    if value is None:
        raise KeyError(f"LP_PORT_{port}")
    return int(value)
