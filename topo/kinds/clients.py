"""Client factories for references to nodes of kinds that are not served by topo's RPC."""

from __future__ import annotations

from typing import Any


def reverb_client(node_id: str, deadline_s: float | None = None) -> Any:
    """A ``reverb.Client`` for the Reverb server node ``node_id`` (not available yet)."""
    raise NotImplementedError(
        f"a reference to the reverb node {node_id!r} would become a reverb.Client, "
        "but the Reverb run-time is not part of topo yet"
    )
