"""Per-node seeds: deterministic from the program seed and the node id, distinct per program."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def derive_seeds(program_seed: int, node_ids: Iterable[str]) -> dict[str, int]:
    """A distinct 32-bit seed per node; collisions are re-drawn deterministically."""
    seeds: dict[str, int] = {}
    used: set[int] = set()
    for node_id in node_ids:
        attempt = 0
        while True:
            text = f"{program_seed}:{node_id}:{attempt}".encode()
            value = int.from_bytes(hashlib.blake2b(text, digest_size=4).digest(), "big")
            if value not in used:
                break
            attempt += 1
        used.add(value)
        seeds[node_id] = value
    return seeds


def key_data(seed: int) -> list[int]:
    """The raw data of ``jax.random.PRNGKey(seed)`` for a 32-bit seed: ``[0, seed]``."""
    return [0, seed]
