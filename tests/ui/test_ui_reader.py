"""What the dashboard reads of a run directory: the files the launcher writes, events
read on from an offset, logs followed across a rotation, metric rows in pieces, a process's
figures."""

from __future__ import annotations

import json
import os
from pathlib import Path

from topo.rundir.layout import log_path
from topo.rundir.status import write_status
from topo.supervisor.metrics_store import MetricsStore
from topo.ui import files
from topo.ui.procinfo import process_figures
from topo.ui.reader import EventReader, RunReader


def test_the_dashboard_reads_the_files_the_launcher_writes(tmp_path: Path) -> None:
    nodes = {"actor/3": None, "learner": None}
    write_status(tmp_path, {"state": "ended", "nodes": [{"id": "actor/3", "state": "finished"}]})
    assert RunReader(tmp_path).status().nodes["actor/3"]["state"] == "finished"
    log_path(tmp_path, "actor/3").parent.mkdir()
    log_path(tmp_path, "actor/3").write_text("2026-11-30T07:40:01.123 hello\n")
    assert files.log_tail(tmp_path, "actor/3")["lines"] == ["2026-11-30T07:40:01.123 hello"]
    store = MetricsStore(tmp_path, nodes, lambda _warning: None)
    store.add([{"time": 1.0, "node": "actor/3", "ret": 2}])
    store.close()
    rows = files.metric_rows(tmp_path, {})
    assert [r["ret"] for r in next(iter(rows.values()))["rows"]] == [2]


def test_events_are_read_on_from_where_the_last_read_ended(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    reader = EventReader(tmp_path)
    assert reader.first() == []
    path.write_text('{"kind": "starting"}\n{"kind": "rea')  # a line still being written
    assert [e["kind"] for e in reader.more()] == ["starting"]
    with open(path, "a") as f:
        f.write('dy"}\nnot json\n{"kind": "applied", "generation": 3}\n')
    assert [e["kind"] for e in reader.more()] == ["ready", "applied"]
    assert reader.more() == []
    os.replace(path, tmp_path / "events.jsonl.1")  # rotated: a new file begins
    path.write_text('{"kind": "stopped"}\n')
    assert [e["kind"] for e in reader.more()] == ["stopped"]
    fresh = EventReader(tmp_path)
    assert [e["kind"] for e in fresh.first()] == ["starting", "ready", "applied", "stopped"]


def test_a_log_is_followed_across_its_rotation(tmp_path: Path) -> None:
    log = log_path(tmp_path, "actor/0")
    log.parent.mkdir()
    log.write_text("one\ntwo\nthr")
    tail = files.log_tail(tmp_path, "actor/0")
    assert tail["lines"] == ["one", "two"]
    with open(log, "a") as f:
        f.write("ee\nfour\n")
    more = files.log_since(tmp_path, "actor/0", tail["offset"])
    assert more["lines"] == ["three", "four"] and not more["reset"]
    assert files.log_since(tmp_path, "actor/0", more["offset"])["lines"] == []
    os.replace(log, log.with_name(log.name + ".1"))
    log.write_text("five\n")
    rotated = files.log_since(tmp_path, "actor/0", more["offset"])
    assert rotated["lines"] == ["five"] and rotated["reset"]
    found = files.log_search(tmp_path, "actor/0", "F")
    assert found == {"lines": ["four", "five"], "matches": 2}


def test_a_huge_log_is_sent_from_its_newest_part(tmp_path: Path) -> None:
    log = log_path(tmp_path, "n")
    log.parent.mkdir()
    log.write_text("".join(f"line {i}\n" for i in range(100_000)))
    tail = files.log_tail(tmp_path, "n", lines=3)
    assert tail["lines"] == ["line 99997", "line 99998", "line 99999"]
    behind = files.log_since(tmp_path, "n", 0)
    assert behind["reset"] and behind["lines"][-1] == "line 99999"
    assert len("\n".join(behind["lines"])) <= files.TAIL_BYTES


def test_metric_rows_come_in_pieces_and_only_numbers(tmp_path: Path) -> None:
    folder = tmp_path / "metrics"
    folder.mkdir()
    rows = [
        {"time": 1.0 + i, "node": "actor/0", "ret": i, "note": "x", "ok": True} for i in range(3)
    ]
    (folder / "actor_0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"ti')
    got = files.metric_rows(tmp_path, {})
    part = got["actor_0"]
    assert part["rows"] == [{"time": 1.0 + i, "node": "actor/0", "ret": i} for i in range(3)]
    assert files.metric_rows(tmp_path, {"actor_0": part["offset"]}) == {}


def test_process_figures_by_pid_here_and_remote() -> None:
    here = process_figures(os.getpid(), None, {"pid": 1, "host": None}, "procs")
    assert here["where"] == "local" and here["rss"] > 0 and not here["shared"]
    threads = process_figures(os.getpid(), None, {"pid": os.getpid(), "host": None}, "threads")
    assert threads["shared"]
    assert process_figures(4242, "10.0.0.7", {}, "ssh") == {"where": "remote", "host": "10.0.0.7"}
    assert process_figures(None, None, {}, "procs") == {"where": "gone"}
