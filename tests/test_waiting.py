"""The shared waits of topo.testing: a line of a process's output and a file's text are
waited on as they come, and a wait that cannot be met says what it waited for."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from topo.testing import Lines, alive, read_until, wait_for_text, wait_until

# prints "one", then "two" once told to on its stdin, then ends
TALKER = "import sys\nprint('one', flush=True)\nsys.stdin.readline()\nprint('two', flush=True)"


def test_lines_wakes_on_a_line_as_it_comes_and_fails_once_the_output_ended() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", TALKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        lines = Lines(proc.stdout)
        assert lines.wait_for("one", 30) == "one\n"
        with pytest.raises(AssertionError, match=r"no line matching 'two' \(0.2s passed\)"):
            lines.wait_for("two", 0.2)  # not said yet: the process waits for its stdin
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert lines.wait_for(lambda line: line.startswith("tw"), 30) == "two\n"
        assert lines.wait_closed(30) == "one\ntwo\n"
        with pytest.raises(AssertionError, match=r"(?s)the output ended.*one\ntwo"):
            lines.wait_for("one", 30)  # each line is matched once: "one" was already
    finally:
        proc.kill()
        proc.wait()


def test_read_until_leaves_the_rest_in_the_pipe_and_stops_a_process_that_never_says_it() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", TALKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert read_until(proc, "one", 30) == ["one\n"]
        out, _ = proc.communicate("go\n", timeout=30)
        assert out == "two\n"  # what followed the line is still there for communicate
    finally:
        proc.kill()
        proc.wait()
    silent = subprocess.Popen(
        [sys.executable, "-c", TALKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:  # it waits for its stdin forever: past the timeout it is stopped, with its output
        with pytest.raises(AssertionError, match=r"(?s)'two' \(0.3s passed.*one\n"):
            read_until(silent, "two", 0.3)
        assert silent.wait(30) != 0
        assert not alive([silent.pid])
    finally:
        silent.kill()
        silent.wait()


def test_wait_for_text_returns_the_file_once_it_holds_the_text(tmp_path: Path) -> None:
    path = tmp_path / "node.log"
    writer = threading.Timer(0.1, lambda: path.write_text("starting\nready\n"))
    writer.start()
    try:
        assert wait_for_text(path, "ready", 30) == "starting\nready\n"
    finally:
        writer.cancel()
    with pytest.raises(AssertionError, match=r"'never' in .*node\.log"):
        wait_for_text(path, "never", 0.2)
    with pytest.raises(AssertionError, match=r"missing\.log"):
        wait_for_text(tmp_path / "missing.log", timeout=0.2)


def test_wait_until_returns_the_value_and_says_what_it_waited_for() -> None:
    seen = iter([0, None, "found"])
    assert wait_until(lambda: next(seen), 30, every=0.01) == "found"
    with pytest.raises(AssertionError, match=r"waiting for the answer \(last: KeyError"):
        wait_until(lambda: {}["x"], 0.1, what="the answer", errors=(KeyError,))
