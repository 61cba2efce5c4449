"""Counter semantics: totals, prefixes into a parent, save/restore, thread safety."""

from __future__ import annotations

import threading

from topo.nodes import Counter


def test_increment_accumulates_and_returns_all_counts() -> None:
    c = Counter()
    c.increment(steps=2)
    assert c.increment(steps=3, episodes=1) == {"steps": 5, "episodes": 1}
    assert c.get_counts() == {"steps": 5, "episodes": 1}


def test_child_forwards_prefixed_counts_to_parent() -> None:
    parent = Counter()
    actor = Counter(parent, prefix="actor", time_delta=0.0)
    learner = Counter(parent, prefix="learner", time_delta=0.0)
    actor.increment(steps=10)
    learner.increment(steps=4)
    assert parent.get_counts() == {"actor_steps": 10, "learner_steps": 4}
    assert actor.get_counts()["learner_steps"] == 4
    assert actor.get_steps_key() == "actor_steps"


def test_time_delta_batches_parent_updates_until_flushed() -> None:
    parent = Counter()
    child = Counter(parent, prefix="actor", time_delta=3600.0)
    child.increment(steps=1)  # first sync goes through
    child.increment(steps=1)
    child.increment(steps=1)
    assert parent.get_counts() == {"actor_steps": 1}
    assert child.get_counts()["actor_steps"] == 3  # get_counts flushes
    assert parent.get_counts() == {"actor_steps": 3}


def test_return_only_prefixed_strips_prefix() -> None:
    parent = Counter()
    parent.increment(other=7)
    child = Counter(parent, prefix="actor", time_delta=0.0, return_only_prefixed=True)
    assert child.increment(steps=2) == {"steps": 2}


def test_save_and_restore_round_trip() -> None:
    c = Counter()
    c.increment(steps=42)
    state = c.save()
    fresh = Counter()
    fresh.restore(state)
    assert fresh.increment(steps=1) == {"steps": 43}


def test_concurrent_increments_are_not_lost() -> None:
    c = Counter()

    def work() -> None:
        for _ in range(2000):
            c.increment(steps=1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.get_counts()["steps"] == 16_000
