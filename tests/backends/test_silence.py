"""The lease's silence (``topo.backends.remote.silence``): a check that comes late, when
the process keeping the lease did not run (a busy machine), does not break it; the next
check on time does, if the far end is still silent."""

from __future__ import annotations

import pytest

from topo.backends.remote import silence
from topo.backends.remote.silence import Silence


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(silence.time, "monotonic", lambda: now[0])
    return now


def test_silence_past_the_lease_breaks_it_on_a_check_made_on_time(clock: list[float]) -> None:
    link = Silence(lease_s=5.0, every_s=1.0)
    link.heard()
    for _ in range(5):
        clock[0] += 1.0
        assert link.check() is None  # up to the lease: not broken
    clock[0] += 1.0
    assert link.check() == 6.0


def test_a_late_check_gives_the_reader_its_turn_first(clock: list[float]) -> None:
    link = Silence(lease_s=5.0, every_s=1.0)
    link.heard()
    clock[0] += 8.0  # this process did not run for 8 s
    assert link.check() is None
    link.heard()  # what the far end said meanwhile, read now
    clock[0] += 1.0
    assert link.check() is None
    clock[0] += 8.0  # late again, and then nothing came
    assert link.check() is None
    clock[0] += 1.0
    assert link.check() == 10.0  # the far end is gone: found one check later


def test_heard_once_says_whether_the_far_end_spoke(clock: list[float]) -> None:
    link = Silence(lease_s=5.0, every_s=1.0)
    assert not link.heard_once
    link.heard()
    assert link.heard_once
