"""ReverbNode handles: a reverb.Client where they are used, as in Launchpad (a real
Reverb server, on threads and on processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("reverb")

from lp_support import Launch

import topo.launchpad as lp


def test_a_node_inserts_and_samples_through_the_replay_handle(lp_launch: Launch) -> None:
    from lp_reverb_nodes import Inserter, tables

    program = lp.Program("replayed")
    replay = program.add_node(lp.ReverbNode(tables), label="replay")
    user = program.add_node(lp.CourierNode(Inserter, replay), label="user")
    assert isinstance(replay, lp.nodes.ReverbHandle) and user is not None
    lp_launch(program)
    client = user.dereference()
    assert client.what() == "ReverbClient"
    assert client.insert([3, 4, 5]) == 3
    assert client.size() == 3
    assert set(client.sample(10)) <= {3, 4, 5}


def test_the_replay_handle_dereferences_to_a_reverb_client(lp_launch: Launch) -> None:
    import reverb
    from lp_reverb_nodes import TABLE, Inserter, tables

    program = lp.Program("replayed")
    replay = program.add_node(lp.ReverbNode(tables), label="replay")
    user = program.add_node(lp.CourierNode(Inserter, replay), label="user")
    launched = lp_launch(program)
    client = replay.dereference()
    client.insert([7], priorities={TABLE: 1.0})
    info = client.server_info()
    assert info[TABLE].current_size == 1
    assert user.dereference().size() == 1  # the node sees what the test thread inserted
    (sample,) = list(client.sample(TABLE, num_samples=1))
    assert int(sample[0].data[0]) == 7
    client.mutate_priorities(TABLE, updates={sample[0].info.key: 5.0})
    (again,) = list(client.sample(TABLE, num_samples=1))
    assert again[0].info.priority == pytest.approx(5.0)
    assert client.address().startswith("unix:")  # the replay's door on this host
    assert client.server_address == client.address()
    assert isinstance(client.client(), reverb.Client)  # the reverb.Client behind it
    written = Path(client.checkpoint())  # no checkpoint dir: a scratch one ...
    assert written.exists()
    assert launched.run.stop(timeout=60) == 0
    assert not written.parent.exists()  # ... removed when the node ends


def test_a_non_positive_checkpoint_delta_is_refused_as_in_launchpad() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        lp.ReverbNode(list, checkpoint_time_delta_minutes=0)
