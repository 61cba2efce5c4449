"""The exporter's small rules: split-group names and what counts as a PRNG key."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from topo.export.args import is_prng_key
from topo.export.layout import snake_name, unique


@pytest.mark.parametrize(
    ("target", "name"),
    [
        ("topo.nodes:StepsLimiter", "steps_limiter"),
        ("examples.agents:build_replay", "replay"),
        ("m:make_replay_tables", "replay_tables"),
        ("m:MLPActor", "mlp_actor"),
        ("m:Outer.Inner", "inner"),
        ("m:make_", "make_"),
        ("m:counter", "counter"),
    ],
)
def test_split_groups_are_named_from_their_target(target: str, name: str) -> None:
    assert snake_name(target) == name


def test_names_are_made_unique() -> None:
    assert unique("replay", {"replay", "replay_2"}) == "replay_3"
    assert unique("replay", set()) == "replay"


def test_prng_keys() -> None:
    assert is_prng_key(np.array([0, 3], dtype=np.uint32))
    assert is_prng_key(jax.random.PRNGKey(3))
    assert is_prng_key(jax.random.split(jax.random.PRNGKey(3))[0])
    assert is_prng_key(jax.random.key(3))  # a typed key array
    assert not is_prng_key(np.array([0, 3, 4], dtype=np.uint32))
    assert not is_prng_key(np.array([0, 3], dtype=np.int32))
    assert not is_prng_key(jax.random.split(jax.random.key(3)))  # several keys
    assert not is_prng_key([0, 3])
