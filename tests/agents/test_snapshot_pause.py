"""The example agents' node loops stop at their pause points when a snapshot asks
(issue 29): a loop run as a node's thread is held by ``gate_of(node).pause()`` within a
few seconds, even while it waits on a replay that holds its inserts; nothing it saves
moves while it is held; its counter has what it saves; ``resume`` lets it go on."""

from __future__ import annotations

import importlib
import importlib.util
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from topo.runtime.context import NodeInfo, ProgramContext, node_scope
from topo.runtime.pause import forget_gate, gate_of
from topo.targets import prepare
from topo.testing import wait_until

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax")),
    reason="needs the rl and reverb extras",
)
ROOT = Path(__file__).resolve().parents[2]
DQN_TABLES = "examples.agents.dqn_core:make_replay_tables"
HOLD_WITHIN_S = 10.0  # a busy 2-core machine; a held loop is normally still in far less


@pytest.fixture(scope="module")
def agents() -> SimpleNamespace:
    """The agents' modules, imported here and not at collection (see test_dqn_learner)."""
    assert prepare(str(ROOT / "examples/topologies/acme_offline.yaml"), "examples.agents") is None
    names = ["dqn", "dqn_core", "offline", "demonstrations", "mava", "dial"]
    return SimpleNamespace(**{n: importlib.import_module(f"examples.agents.{n}") for n in names})


@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    """Every thread a test starts has ended after it (nodes, their helpers, samplers): one
    left waiting on a replay would go on in this process, and use its CPU, for ever."""
    before = set(threading.enumerate())
    yield
    left = [  # zmq's garbage collector starts with the process's first zero-copy send
        t
        for t in threading.enumerate()
        if t not in before and t.is_alive() and type(t).__name__ != "GarbageCollectorThread"
    ]
    wait_until(  # a helper abandoned in a replay call ends once its server is gone
        lambda: not any(t.is_alive() for t in left),
        60,
        what=f"the threads {[t.name for t in left]} to end (none may be left behind)",
    )


class NodeThread:
    """``loop(stop)`` running in a thread as node ``node_id`` of a local program."""

    def __init__(self, node_id: str, loop: Callable[[threading.Event], None]) -> None:
        self.node_id = node_id
        program = ProgramContext.local()
        self.stop = program.stop_event  # what topo.stop_event() gives the loop
        self.errors: list[BaseException] = []

        def body() -> None:
            with node_scope(program, NodeInfo(node_id, node_id)):
                try:
                    loop(self.stop)
                except BaseException as exc:  # reported by the test
                    self.errors.append(exc)

        self.thread = threading.Thread(target=body, name=f"{node_id}-loop", daemon=True)
        self.thread.start()

    def close(self, timeout: float = 30.0) -> None:
        self.stop.set()
        gate_of(self.node_id).resume()
        self.thread.join(timeout)
        forget_gate(self.node_id)
        assert not self.thread.is_alive(), f"{self.node_id}'s loop did not end"
        assert not self.errors, self.errors


def held_still(read: Callable[[], Any], node_id: str) -> Any:
    """Pause ``node_id``; assert it is held within HOLD_WITHIN_S and that ``read()`` gives
    the same twice 0.5 s apart; the value (the node stays held)."""
    started = time.monotonic()
    moving = gate_of(node_id).pause(HOLD_WITHIN_S)
    assert moving == [], f"still moving after {time.monotonic() - started:.1f}s: {moving}"
    first = read()
    time.sleep(0.5)
    assert read() == first
    return first


STEPS_S = 180.0  # how long the first steps may take: JAX compiles first (minutes, loaded)


def test_an_offline_learner_is_held_between_steps_and_goes_on_after(
    agents: SimpleNamespace,
) -> None:
    from topo.nodes import Counter

    data = agents.demonstrations.record_episodes(episodes=3, seed=0)
    counter = Counter()
    learner = agents.offline.Learner(
        [0, 1],
        counter=counter,
        dataset=lambda key: agents.demonstrations.batches(data, 32, 0),
        print_every_s=1e9,
    )

    def loop(stop: threading.Event) -> None:
        learner._stop = stop
        learner.run()

    node = NodeThread("offline-learner", loop)
    try:
        wait_until(lambda: learner.steps >= 20, STEPS_S)
        steps = held_still(lambda: learner.steps, "offline-learner")
        state = learner.save()  # what a snapshot takes while the node is held
        assert state["steps"] == steps
        assert counter.get_counts()["learner_steps"] == steps  # sent before it held
        gate_of("offline-learner").resume()
        wait_until(lambda: learner.steps > steps + 10, STEPS_S)
    finally:
        node.close()


def jailed_replay(tables: str, **table_args: Any) -> Any:
    """A real Reverb server in a process of its own, as a reverb node runs it: a client
    still waiting on it when it stops fails, where one waiting on a server in this
    process would wait for ever (a thread left behind, spinning)."""
    from topo.nodes.reverb import ReverbServer

    return ReverbServer(tables, **table_args)


@pytest.fixture
def tight_replay(agents: SimpleNamespace) -> Iterator[tuple[Any, Any]]:
    """A Reverb server whose rate limiter soon holds inserts back (nothing samples), and
    its client."""
    import reverb

    server = jailed_replay(
        DQN_TABLES, min_size_to_sample=20, samples_per_insert=4.0, samples_per_insert_tolerance=0.1
    )
    yield server, reverb.Client(server.address())
    server.close()


@pytest.mark.slow
def test_a_dqn_actor_held_by_the_rate_limiter_is_held_for_a_snapshot(
    agents: SimpleNamespace, tight_replay: tuple[Any, Any]
) -> None:
    """Its writes wait on the replay (which waits on a learner a snapshot holds): inside a
    pausable wait the actor counts as held, and its counter has what it saves."""
    from topo.nodes import Counter

    tight_replay_server, tight_replay = tight_replay
    source_params = agents.dqn.Learner(random_key=0).get_variables(["policy"])[0]

    class Source:
        def get_variables(self, names: list[str]) -> list[Any]:
            return [source_params for _ in names]

    counter = Counter()
    actor = agents.dqn.Actor(0, tight_replay, Source(), counter, epsilon=1.0)
    node = NodeThread("actor", actor.run_loop)
    try:
        # the table fills up to what the limiter allows, then the actor's writes wait
        wait_until(lambda: actor.steps >= 20, STEPS_S)
        time.sleep(1.0)  # the steps the limiter allows are taken (held still is the test)
        held_back = actor.steps
        time.sleep(0.5)
        assert actor.steps == held_back  # the limiter holds its write: a pausable wait
        for _ in range(2):
            state = held_still(actor.save, "actor")
            counts = counter.get_counts()
            assert counts.get("actor_steps", 0) == state["steps"]
            assert counts.get("actor_episodes", 0) == state["episodes"]
            gate_of("actor").resume()
            time.sleep(0.3)  # it runs a while between two holds
        # Samples make room: the actor, let go, writes and steps on.
        steps = actor.steps
        for _ in range(400):
            next(tight_replay.sample(agents.dqn_core.TABLE, num_samples=1))
            if actor.steps > steps:
                break
        wait_until(lambda: actor.steps > steps, STEPS_S)
    finally:
        node.stop.set()
        # The replay releases the writes its limiter still holds, as at a program's stop,
        # so the actor's loop ends (a replay that goes away first fails its last flush).
        tight_replay_server.close()
        node.close()


class Replay:
    """What a DQN learner uses of topo's replay handle, over a real Reverb client."""

    def __init__(self, server: Any, client: Any) -> None:
        self._address, self._client = server.address(), client

    def address(self) -> str:
        return self._address

    def mutate_priorities(self, table: str, updates: dict[int, float]) -> None:
        self._client.mutate_priorities(table, updates=updates)


def fill(client: Any, table: str, count: int, seed: int) -> None:
    """Write ``count`` random transitions into ``table``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    with client.writer(max_sequence_length=1) as writer:
        for _ in range(count):
            writer.append(
                {
                    "observation": rng.normal(size=4).astype(np.float32),
                    "action": np.int32(rng.integers(2)),
                    "reward": np.float32(1.0),
                    "discount": np.float32(0.99),
                    "next_observation": rng.normal(size=4).astype(np.float32),
                }
            )
            writer.create_item(table, 1, 1.0)


@pytest.fixture
def sampling_replay(agents: SimpleNamespace) -> Iterator[tuple[Any, Any]]:
    """A Reverb server whose rate limiter lets about 40 more samples through than items
    were inserted, then holds samples back (no actor inserts); its client."""
    import reverb

    server = jailed_replay(
        DQN_TABLES, min_size_to_sample=10, samples_per_insert=1.0, samples_per_insert_tolerance=5.0
    )
    yield server, reverb.Client(server.address())
    server.close()


@pytest.mark.slow
def test_a_dqn_learner_waiting_for_samples_is_held_and_its_counter_agrees(
    agents: SimpleNamespace, sampling_replay: tuple[Any, Any]
) -> None:
    """The limiter holds the learner's samples once it is ahead of the inserts: its sampler
    waits inside a pausable wait, the learner polls its pause point; both are held, and
    the counter has the learner's steps (sent before it held)."""
    from topo.nodes import Counter

    server, client = sampling_replay
    table = agents.dqn_core.TABLE
    fill(client, table, 40, seed=0)
    counter = Counter()
    learner = agents.dqn.Learner(0, Replay(server, client), counter, batch_size=8)
    node = NodeThread("dqn-learner", lambda stop: learner.run())
    try:
        wait_until(lambda: learner.steps >= 3, STEPS_S)
        time.sleep(1.5)  # the samples the limiter allows are used up
        waiting = learner.steps
        time.sleep(0.5)
        assert learner.steps == waiting  # the sampler waits on the limiter
        steps = held_still(lambda: learner.save()["steps"], "dqn-learner")
        assert counter.get_counts()["learner_steps"] == steps == learner.steps
        gate_of("dqn-learner").resume()
        fill(client, table, 40, seed=1)  # more inserts: more samples allowed
        wait_until(lambda: learner.steps > steps, STEPS_S)
    finally:
        node.close()


@pytest.mark.slow
def test_a_dial_executor_waiting_on_a_full_queue_is_held_and_so_is_the_trainer(
    agents: SimpleNamespace,
) -> None:
    """The executor's inserts wait while the queue is full, the trainer's samples while it
    is empty: both are held for a snapshot, and let go they fill and drain it again."""
    import reverb

    from topo.nodes import Counter

    server = jailed_replay("examples.agents.mava:make_replay_tables", max_size=8)
    client = reverb.Client(server.address())
    counter = Counter()
    trainer = agents.mava.Trainer(client, counter, num_agents=3, batch_size=4)
    executor = agents.mava.Executor(0, client, trainer, counter, episodes_per_round=4)
    nodes = [
        NodeThread("executor", lambda stop: executor.run()),
        NodeThread("trainer", lambda stop: trainer.run()),
    ]
    try:
        wait_until(lambda: trainer.steps >= 3, STEPS_S)
        states = {
            "executor": held_still(executor.save, "executor"),
            "trainer": held_still(lambda: trainer.save()["steps"], "trainer"),
        }
        counts = counter.get_counts()
        assert counts["executor_steps"] == states["executor"]["steps"]
        assert counts["executor_episodes"] == states["executor"]["episodes"]
        assert counts["trainer_steps"] == states["trainer"]
        gate_of("executor").resume()
        gate_of("trainer").resume()
        wait_until(lambda: trainer.steps > states["trainer"] + 2, STEPS_S)
    finally:
        for node in nodes:
            node.stop.set()
        server.close()
        for node in nodes:
            node.close()
