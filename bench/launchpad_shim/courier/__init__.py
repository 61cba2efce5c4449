"""``courier`` for Launchpad's test files: topo has no public RPC server or client bound
to an address (its handles reach nodes by id), so ``courier.Server`` and
``courier.Client`` are names that raise, saying so, when used. They exist so that test
files naming them in annotations import."""

from __future__ import annotations

from typing import Any

import launchpad  # noqa: F401 -- its import finder says why courier.python is not here

_WHY = (
    "topo has no courier {what}: its RPC serves a node's object and handles reach it by "
    "node id (pass a handle of a CourierNode instead of an address)"
)


class Server:
    """Stands for ``courier.Server``; raises when built."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(_WHY.format(what="Server bound to a port"))


class Client:
    """Stands for ``courier.Client``; raises when built."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(_WHY.format(what="Client of an address"))
