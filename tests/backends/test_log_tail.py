"""The log relay and log rotation on real files: bounded reads, skips said in one line,
whole lines only, rotation followed, ``append`` and ``close`` never held up by it."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest

from topo.backends import tail
from topo.backends.rotation import LogLimit, RotatingFds, RotatingFile, rotate
from topo.backends.tail import LogTailer
from topo.testing import wait_until

LINE = re.compile(r"^line (\d{8}) x{60}$")


def _lines(start: int, n: int) -> bytes:
    return b"".join(b"line %08d %s\n" % (i, b"x" * 60) for i in range(start, start + n))


class Collect:
    """An ``emit`` that keeps what it is given (optionally slow)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.lines: list[tuple[str, str]] = []
        self.delay = delay

    def __call__(self, label: str, line: str) -> None:
        if self.delay:
            time.sleep(self.delay)
        self.lines.append((label, line))

    def text(self) -> list[str]:
        return [line for _, line in self.lines]


@pytest.mark.slow
def test_a_flood_is_skipped_in_one_line_and_lines_stay_whole(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "learner.log"
    log.parent.mkdir()
    log.touch()
    got = Collect(delay=0.0005)  # ~2000 lines/s: far slower than the file grows
    tailer = LogTailer({"learner": log}, got)
    tailer.start()
    try:
        with open(log, "ab") as f:
            for block in range(40):  # 40 x 20000 lines of 72 bytes: 57.6 MB
                f.write(_lines(block * 20000, 20000))
                f.flush()
        wait_until(
            lambda: any(LINE.match(t) and t.startswith("line 00799999") for t in got.text()), 10
        )
    finally:
        tailer.close()
    text = got.text()
    skips = [t for t in text if "of output skipped" in t]
    assert skips, text[:5]
    assert re.fullmatch(
        r"\[learner: [\d.]+ (MB|kB) of output skipped; the whole output is in logs/learner.log\]",
        skips[0],
    )
    kept = [t for t in text if "of output skipped" not in t]
    assert all(LINE.match(t) for t in kept), [t for t in kept if not LINE.match(t)][:3]
    numbers = [int(LINE.match(t).group(1)) for t in kept]  # type: ignore[union-attr]
    assert numbers == sorted(numbers) and numbers[-1] == 799999
    assert len(kept) < 400000, "most of the flood should have been skipped"


def test_reads_are_bounded_a_huge_line_is_cut(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.touch()
    got = Collect()
    tailer = LogTailer({"n": log}, got)
    tailer.start()
    try:
        with open(log, "ab") as f:
            f.write(b"y" * (3 << 20) + b"\nafter\n")
        wait_until(lambda: "after" in got.text(), 10)
    finally:
        tailer.close()
    text = got.text()
    assert text[-1] == "after"
    cut = [t for t in text if t.startswith("y")]
    assert len(cut) == 1 and cut[0].endswith("[… line cut at 65.5 kB]")
    assert len(cut[0]) < tail.MAX_LINE + 100


def test_rotation_is_followed_and_append_is_not_relayed(tmp_path: Path) -> None:
    log = tmp_path / "n.log"
    log.touch()
    got = Collect()
    tailer = LogTailer({"n": log}, got, interval=0.02)
    tailer.start()
    try:
        with open(log, "ab") as f:
            f.write(_lines(0, 100))
        wait_until(lambda: len(got.lines) >= 100, 10)
        tailer.append("n", "Traceback: hidden\nValueError: hidden")
        rotate(log, 2)
        with open(log, "ab") as f:
            f.write(_lines(100, 100))
        wait_until(lambda: len(got.lines) >= 200, 10)
    finally:
        tailer.close()
    assert got.text() == _lines(0, 200).decode().splitlines()
    assert "ValueError: hidden" in (tmp_path / "n.log.1").read_text()


def test_close_shows_the_end_of_the_output_after_a_rotation_with_a_slow_listener(
    tmp_path: Path,
) -> None:
    log = tmp_path / "n.log"
    log.touch()
    got = Collect(delay=0.001)  # ~1000 lines/s: the relay is far behind the writer
    tailer = LogTailer({"n": log}, got, interval=0.02)
    tailer.start()
    with open(log, "ab") as f:
        f.write(_lines(0, 50_000))  # 3.6 MB, unread when the file rotates
    wait_until(lambda: len(got.lines) >= 10, 10)
    rotate(log, 2)
    with open(log, "ab") as f:
        f.write(_lines(50_000, 5))
    t0 = time.monotonic()
    tailer.close()
    took = time.monotonic() - t0
    text = got.text()
    assert text[-5:] == _lines(50_000, 5).decode().splitlines()  # the end of the output
    assert took < tail.CLOSE_S + 1.5
    assert len(text) < 50_000  # the rotated file's unread rest was skipped, said in a line
    assert any("skipped" in t for t in text)
    assert all(LINE.match(t) or "skipped" in t for t in text)  # no torn line


def test_lines_read_when_close_comes_are_shown_by_the_final_round(tmp_path: Path) -> None:
    """close() in the middle of a chunk the relay is showing to a slow listener: the
    relay stops between two lines and the final round shows the rest, the last line
    included (they used to count as skipped, and the end of the output was lost)."""
    log = tmp_path / "n.log"
    log.touch()
    closing = threading.Event()

    class SlowThenClose(Collect):
        def __call__(self, label: str, line: str) -> None:
            super().__call__(label, line)
            if len(self.lines) == 5:  # mid-chunk: close comes from another thread
                threading.Thread(target=tailer.close).start()
                closing.wait(5)
                time.sleep(0.2)  # a slow emit, still in it as close comes

    got = SlowThenClose(delay=0.001)
    tailer = LogTailer({"n": log}, got, interval=0.02)
    original_set = tailer._closed.set

    def set_and_tell() -> None:
        original_set()
        closing.set()

    tailer._closed.set = set_and_tell  # type: ignore[method-assign]
    tailer.start()
    with open(log, "ab") as f:
        f.write(_lines(0, 300))  # one chunk of 21 kB: far less than the final budget
    wait_until(lambda: len(got.lines) >= 300, 10)
    text = got.text()
    assert text == _lines(0, 300).decode().splitlines()  # every line, in order, once


@pytest.mark.slow
def test_append_and_close_do_not_wait_for_a_stuck_emit(tmp_path: Path) -> None:
    log = tmp_path / "n.log"
    log.touch()
    release, stuck = threading.Event(), threading.Event()

    def emit(label: str, line: str) -> None:
        stuck.set()
        release.wait(60)

    tailer = LogTailer({"n": log}, emit, interval=0.02)
    tailer.start()
    try:
        with open(log, "ab") as f:
            f.write(_lines(0, 10))
        assert stuck.wait(10)  # the relay is now stuck in emit
        t0 = time.monotonic()
        tailer.append("n", "a traceback")
        assert time.monotonic() - t0 < 1.0
        tailer.close()
        assert time.monotonic() - t0 < tail.CLOSE_S + 1.5
        assert log.read_text().endswith("a traceback\n")
    finally:
        release.set()


def test_a_rotating_file_keeps_its_cap_and_no_line_is_lost(tmp_path: Path) -> None:
    log = tmp_path / "n.log"
    limit = LogLimit(max_bytes=200_000, keep=2)
    f = RotatingFile(log, limit)
    for i in range(10000):
        f.write(f"line {i:08d} {'x' * 60}\n")
    f.close()
    files = [log, log.with_name("n.log.1"), log.with_name("n.log.2")]
    assert all(p.exists() for p in files) and not log.with_name("n.log.3").exists()
    assert all(p.stat().st_size <= limit.max_bytes * 1.1 for p in files)
    numbers = [int(x.split()[1]) for p in reversed(files) for x in p.read_text().splitlines()]
    assert numbers == list(range(numbers[0], 10000))


@pytest.mark.slow
@pytest.mark.parametrize("python_level", [True, False])
def test_rotating_fds_cap_what_is_written_to_the_fds(tmp_path: Path, python_level: bool) -> None:
    """In a real child process: writes to fd 1 (through Python, or os.write as C code
    does) are rotated, the other writer of the file follows the rotation."""
    log = tmp_path / "child.log"
    limit = LogLimit(max_bytes=300_000, keep=3)
    pid = os.fork()
    if pid == 0:  # the child: fd 1 on the log, rotated
        code = 1
        try:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.dup2(fd, 1)
            rot = RotatingFds(log, limit, fds=(1,))
            rot.watch()
            for i in range(20):
                data = _lines(i * 1000, 1000)  # 72 kB
                os.write(1, data)
                if python_level:
                    rot.written(len(data))
                time.sleep(0.12)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    files = [log, *(log.with_name(f"child.log.{n}") for n in (1, 2, 3))]
    assert all(p.exists() for p in files) and not log.with_name("child.log.4").exists()
    assert all(p.stat().st_size <= limit.max_bytes + 2 * 72_000 for p in files)
    numbers = [int(x.split()[1]) for p in reversed(files) for x in p.read_text().splitlines()]
    assert numbers == list(range(numbers[0], 20000))


def test_a_line_written_while_the_file_rotates_goes_to_the_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another thread of the writer may write while the full file is renamed (the rename
    lets it run): its line lands in the new file, not past the cap of the rotated one."""
    import topo.backends.rotation as rotation

    log = tmp_path / "node.log"
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, b"x" * 2000 + b"\n")
    rot = RotatingFds(log, LogLimit(max_bytes=1000, keep=2), fds=(fd,))
    renamed = rotation.rotate

    def rotate_with_a_write(path: Path, keep: int) -> None:  # a write lands mid-rotation
        os.write(fd, b"written while rotating\n")
        renamed(path, keep)
        os.write(fd, b"written after\n")

    monkeypatch.setattr(rotation, "rotate", rotate_with_a_write)
    try:
        rot.check()
        os.write(fd, b"then\n")
    finally:
        os.close(fd)
    assert (tmp_path / "node.log.1").read_bytes() == b"x" * 2000 + b"\n"
    assert log.read_bytes() == b"written while rotating\nwritten after\nthen\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node.log", "node.log.1"]
