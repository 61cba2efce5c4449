"""ReverbNode handles: a reverb.Client where they are used, as in Launchpad (a real
Reverb server, on threads and on processes)."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest
from lp_support import Launch

import topo.launchpad as lp
from topo.testing import wait_until

# Not imported here: every worker collects this module, few run it (TensorFlow: ~3 CPU-s).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("reverb") is None, reason="needs reverb")


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_writers_held_back_at_the_stop_are_released_whatever_their_items(
    lp_launch: Launch,
) -> None:
    """Acme's and Mava's actors write squeezed single steps with a trajectory writer; a
    rate limiter holds them inside Reverb before the learner samples. At the stop the
    replay node frees them by sampling, which must not choke on such items."""
    from lp_reverb_nodes import StepWriter, limited_tables

    program = lp.Program("held")
    replay = program.add_node(lp.ReverbNode(limited_tables), label="replay")
    with program.group("actor"):
        actors = [program.add_node(lp.CourierNode(StepWriter, replay)) for _ in range(2)]
    launched = lp_launch(program)
    clients = [a.dereference() for a in actors]
    counts = [-1, -1]

    def held_back() -> bool:  # their counts stop moving: the same twice, 0.3 s apart
        now = [c.count() for c in clients]
        still = now == counts and all(n > 0 for n in now)
        counts[:] = now
        return still

    wait_until(held_back, 30, what="the rate limiter to hold the writers back", every=0.3)
    started = time.monotonic()
    assert launched.run.stop(timeout=60) == 0
    assert time.monotonic() - started < 4.5  # released, not killed after the grace period
    assert not any("killed" in w for w in launched.run.launcher.state.warnings)
    logs = "".join(p.read_text() for p in (Path(launched.run.run_dir) / "logs").glob("*.log"))
    assert "raised while the program was stopping" not in logs
