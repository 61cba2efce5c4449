"""The pieces behind ``topo logs`` and ``topo stop`` on real files and sockets: the
history of a node's rotated logs in time order, ``--since``, and a control channel that
answers only a client holding the run's key, and proves it holds it too."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from topo.rundir.layout import CONTROL_KEY_FILE
from topo.rundir.lines import bare
from topo.runs.control import ControlError, ControlServer, request
from topo.runs.history import BadSince, history, parse_since, parse_time
from topo.runs.probe import launcher_alive, launcher_record


def test_history_interleaves_nodes_in_time_across_rotated_files(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log.1").write_text("2026-12-01T10:00:00.000 a1\n2026-12-01T10:00:02.000 a2\n")
    (logs / "a.log").write_text("2026-12-01T10:00:04.000 a3\nbelow python\n")
    (logs / "b.log").write_text(
        "2026-12-01T10:00:01.000 b1\n2026-12-01T10:00:03.000 ── topo: attempt 1 ──\n"
        "2026-12-01T10:00:05.000 b2\n"
    )
    files = {"a": logs / "a.log", "b": logs / "b.log"}
    got = [(label, bare(line)) for label, line in history(files)]
    assert got == [
        ("a", "a1"),
        ("b", "b1"),
        ("a", "a2"),
        ("a", "a3"),
        ("a", "below python"),  # keeps the time of the line before it
        ("b", "b2"),
    ]  # the marker line is left out
    last = [bare(line) for _, line in history(files, tail=1)]
    assert last == ["below python", "b2"]
    since = parse_since("2026-12-01T10:00:03.500")
    assert next(bare(line) for _, line in history(files, since=since)) == "a3"


def test_since_takes_durations_and_times_and_says_what_it_wants() -> None:
    assert parse_since("10m", now=1000.0) == 400.0
    assert parse_since("1.5h", now=10000.0) == 10000.0 - 5400.0
    assert parse_since("1h30m", now=10000.0) == 10000.0 - 5400.0  # as docker's
    assert parse_since("1796162400") == 1796162400.0  # seconds since the epoch
    assert parse_since("2026-12-01T22:00:00Z") == 1796162400.0
    with pytest.raises(BadSince, match=r"--since 'yesterday': .*30s, 10m, 1h30m, 1d"):
        parse_since("yesterday")
    with pytest.raises(BadSince, match="--until 'nan'"):
        parse_time("nan", "--until")


def _server(run_dir: Path, seen: list[dict[str, Any]], host: str | None = None) -> ControlServer:
    def handler(req: dict[str, Any]) -> dict[str, Any]:
        seen.append(req)
        return {"ok": True, "echo": req.get("op")}

    return ControlServer(run_dir, handler, host=host)


def test_the_control_channel_answers_the_key_holder_only(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    server = _server(tmp_path, seen)
    try:
        assert stat.S_IMODE(os.stat(tmp_path / CONTROL_KEY_FILE).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(server.dir).st_mode) == 0o700
        assert request(tmp_path, server.path, {"op": "ping"}) == {"ok": True, "echo": "ping"}
        other = tmp_path / "other"
        other.mkdir()
        (other / CONTROL_KEY_FILE).write_text(os.urandom(32).hex() + "\n")  # not the run's key
        with pytest.raises(ControlError):
            request(other, server.path, {"op": "stop"})
        assert [r["op"] for r in seen] == ["ping"]  # the wrong key's request never ran
    finally:
        server.close()
    assert not os.path.exists(server.dir)


def test_over_tcp_the_control_channel_answers_the_key_holder_only(tmp_path: Path) -> None:
    """A launcher operated from other hosts (inside a Slurm job) listens on TCP: the same
    mutual proof over the run's key, no Unix socket or directory made, the port freed at
    close."""
    seen: list[dict[str, Any]] = []
    server = _server(tmp_path, seen, host="127.0.0.1")
    try:
        assert server.dir is None and server.path.startswith("tcp://127.0.0.1:")
        assert request(tmp_path, server.path, {"op": "ping"}) == {"ok": True, "echo": "ping"}
        other = tmp_path / "other"
        other.mkdir()
        (other / CONTROL_KEY_FILE).write_text(os.urandom(32).hex() + "\n")
        with pytest.raises(ControlError):
            request(other, server.path, {"op": "stop"})
        assert [r["op"] for r in seen] == ["ping"]
    finally:
        server.close()
    with pytest.raises(ControlError, match="cannot reach the run's launcher"):
        request(tmp_path, server.path, {"op": "ping"}, timeout=5)


def test_a_client_refuses_a_server_that_does_not_hold_the_key(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    real = tmp_path / "real"
    fake = tmp_path / "fake"
    real.mkdir()
    fake.mkdir()
    impostor = _server(fake, seen)  # listens, but with a key of its own
    try:
        (real / CONTROL_KEY_FILE).write_text(os.urandom(32).hex() + "\n")
        with pytest.raises(ControlError):
            request(real, impostor.path, {"op": "stop"})
        assert seen == []
    finally:
        impostor.close()


def test_a_launcher_record_names_one_live_process() -> None:
    mine = launcher_record()
    assert launcher_alive(mine) is True
    assert launcher_alive({**mine, "start": (mine["start"] or 0) + 1}) is False  # pid reused
    assert launcher_alive({**mine, "host": "elsewhere"}) is None
