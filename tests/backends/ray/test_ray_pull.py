"""The new complete lines of followed log files, as a remote agent (a Ray node's, an
ssh host's) reads them for its launcher (no Ray)."""

from __future__ import annotations

from pathlib import Path

import pytest

from topo.backends.remote import follow
from topo.backends.remote.follow import LogFollower


def test_lines_come_whole_and_a_file_may_appear_later(tmp_path: Path) -> None:
    tail = LogFollower()
    old = tmp_path / "old.log"
    old.write_text("sent by an earlier agent\n")
    tail.follow("a", old)  # from its end
    tail.follow("b", tmp_path / "new.log")  # not there yet
    assert tail.read() == {}
    with old.open("a") as f:
        f.write("one\ntw")
    (tmp_path / "new.log").write_text("first\n")
    assert tail.read() == {"a": "one\n", "b": "first\n"}
    assert tail.read() == {}  # "tw" waits for its newline
    with old.open("a") as f:
        f.write("o\n")
    assert tail.read() == {"a": "two\n"}
    with old.open("a") as f:
        f.write("last, no newline")
    assert tail.read(final=True) == {"a": "last, no newline"}
    tail.close()


def test_from_the_start_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "own.log"
    path.write_text("early\n")
    tail = LogFollower()
    tail.follow("own", path, from_end=False)
    tail.follow("own", tmp_path / "other.log")  # a second follow of a label is ignored
    assert tail.read() == {"own": "early\n"}


def test_a_line_longer_than_a_chunk_is_split_not_stuck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follow, "CHUNK", 8)
    path = tmp_path / "long.log"
    path.write_text("")
    tail = LogFollower()
    tail.follow("x", path)
    path.write_text("0123456789abc\n")
    got = "".join(tail.read().get("x", "") for _ in range(3))
    assert got == "0123456789abc\n"


def test_a_chatty_file_does_not_starve_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follow, "BUDGET", 10)
    tail = LogFollower()
    for name in "abc":
        (tmp_path / name).write_text("")
        tail.follow(name, tmp_path / name)
        (tmp_path / name).write_text(f"{name * 20}\n")
    seen: set[str] = set()
    for _ in range(3):
        seen |= set(tail.read())
    assert seen == {"a", "b", "c"}
