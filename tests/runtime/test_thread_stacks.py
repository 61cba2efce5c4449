"""What ``topo stacks`` shows of a process (``topo.runtime.stacks``): the program's
threads from their first frame of the program's code, the frames of topo and Python
above it counted; threads with no frame of the program's code named on one line; all of
it with ``everything``."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from topo.runtime.stacks import thread_stacks


def _parked_in_the_program(release: threading.Event, parked: threading.Event) -> None:
    parked.set()
    release.wait()


@pytest.fixture
def threads() -> Iterator[None]:
    """A thread parked in this module's code and one in Python's alone (a timer)."""
    release, parked = threading.Event(), threading.Event()
    mine = threading.Thread(
        target=_parked_in_the_program, args=(release, parked), name="mine", daemon=True
    )
    mine.start()
    timer = threading.Timer(600, lambda: None)
    timer.name = "python-only"
    timer.start()
    assert parked.wait(10)
    try:
        yield
    finally:
        release.set()
        timer.cancel()
        mine.join(10)
        timer.join(10)


def test_the_program_s_threads_start_at_its_code_and_the_others_are_named(threads: None) -> None:
    text = thread_stacks()
    assert text.startswith("process ")
    [mine] = [p for p in text.split("\n\n") if p.startswith('thread "mine"')]
    lines = mine.splitlines()
    # threading's bootstrap is counted above the thread's first frame of this module
    assert lines[1] == "  (3 frames of topo and Python above)", mine
    assert "test_thread_stacks.py" in lines[2] and "in _parked_in_the_program" in lines[2]
    assert "release.wait()" in mine and "threading.py" in mine  # and where it waits
    assert 'thread "python-only"' not in text
    [quiet] = [p for p in text.split("\n\n") if "in topo's or Python's code only" in p]
    assert "python-only" in quiet and "(topo stacks --all shows them)" in quiet


def test_everything_shows_every_frame_of_every_thread(threads: None) -> None:
    text = thread_stacks(everything=True)
    [mine] = [p for p in text.split("\n\n") if p.startswith('thread "mine"')]
    assert "frames of topo and Python above" not in mine
    assert "_bootstrap" in mine.splitlines()[1]  # threading's own first frame
    assert 'thread "python-only" (daemon), most recent call last:' not in text  # not a daemon
    assert 'thread "python-only", most recent call last:' in text
    assert "in topo's or Python's code only" not in text
    count = int(text.split()[2])  # "process PID, N thread(s)"
    assert count == text.count('\nthread "')
