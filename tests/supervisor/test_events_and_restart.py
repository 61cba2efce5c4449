"""What a run records for the dashboard and what it does when asked: every status event
in events.jsonl, each node's call figures in status.json, and a node restarted on
request over the control channel (procs and threads), whatever its restart policy."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.operate import ticker_topology
from topo.backends.base import Event
from topo.runs.control import request
from topo.runtime import callstats, latency
from topo.supervisor.events_log import EventLog, event_row
from topo.testing import wait_until

ROOT = Path(__file__).resolve().parents[2]
CONSUMER_PRODUCERS = ROOT / "examples" / "topologies" / "consumer_producers.yaml"


def events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def status(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "status.json").read_text())
    return data


def test_an_event_row_keeps_its_fields_and_bounds_its_text() -> None:
    event = Event("failed", "learner", "learner", 42, "boom", 12.5, {"traceback": "x" * 50_000})
    row = event_row(event)
    assert row["kind"] == "failed" and row["node"] == "learner" and row["pid"] == 42
    assert len(row["traceback"]) == 32_000
    future = event_row(Event("applied", message="a change", time=1.0, data={"generation": 3}))  # type: ignore[arg-type]
    assert future == {"time": 1.0, "kind": "applied", "message": "a change", "generation": 3}


def test_the_event_file_is_bounded_and_never_blocks(tmp_path: Path) -> None:
    log = EventLog(tmp_path, max_bytes=2000)
    for i in range(200):
        log(Event("started", executable=f"e{i}", message="m" * 20, time=float(i)))
        log(Event("log", "n", message="a line"))
    log.close()
    kept = (tmp_path / "events.jsonl").read_text().splitlines()
    older = (tmp_path / "events.jsonl.1").read_text().splitlines()
    assert all('"kind":"started"' in line for line in kept + older)  # no log lines
    assert len((tmp_path / "events.jsonl").read_bytes()) <= 2000
    assert json.loads(kept[-1])["executable"] == "e199"


@pytest.mark.slow
def test_a_run_records_its_events_and_the_nodes_call_figures(
    topo_launch: Callable, tmp_path: Path
) -> None:
    run = topo_launch(CONSUMER_PRODUCERS, "procs", params=["work_items=200"])
    assert run.wait(120) == 0, run.failure
    kinds = [e["kind"] for e in events(run.run_dir)]
    for kind in ("starting", "started", "ready", "finished", "stopping", "exited", "stopped"):
        assert kind in kinds, kinds
    assert "log" not in kinds and "metrics" not in kinds
    nodes = {n["id"]: n for n in status(run.run_dir)["nodes"]}
    served = sum(e["calls"] for p in range(4) for e in nodes[f"producer/{p}"]["rpc"]["served"])
    made = nodes["consumer"]["rpc"]["made"]
    assert served == 200 == sum(e["calls"] for e in made)  # every call, counted on both sides
    assert {e["peer"] for e in made} == {f"producer/{p}" for p in range(4)}
    assert all(e["method"] == "work" and e["errors"] == 0 and e["mean_ms"] > 0 for e in made)


def test_the_call_counters_report_rates_percentiles_and_fall_quiet() -> None:
    state = callstats._Counters()
    reporter = callstats.Reporter(state)
    book = type("Book", (), {"metrics": lambda self, rows: None})()
    state.books["n"] = book
    cell: list[Any] = [0, 0, 0.0, 0.0, latency.empty()]
    state.served["n"] = {"get": cell}
    for _ in range(9):
        callstats._add(cell, 0.03, True)
    callstats._add(cell, 0.23, False)  # 10 calls, 0.5 s in all, one failed
    [(_, row)] = reporter.rows(100.0)
    [entry] = row["served"]
    p50, p99 = entry.pop("p50_ms"), entry.pop("p99_ms")
    assert entry == {
        "method": "get",
        "calls": 10,
        "errors": 1,
        "rate": 5.0,
        "mean_ms": 50.0,
        "max_ms": 230.0,
    }
    # within a bucket (a quarter) of the calls' own latencies, never above the slowest
    assert 30 / latency.GROWTH <= p50 <= 30 * latency.GROWTH
    assert 230 / latency.GROWTH <= p99 <= 230
    assert row["latency"]["served"] == {"p50_ms": p50, "p99_ms": p99}
    assert row["latency"]["made"] == {"p50_ms": None, "p99_ms": None}
    for _ in range(4):  # 4 more calls, 0.1 s more, in 2 s: the percentiles are theirs
        callstats._add(cell, 0.025, True)
    [(_, row)] = reporter.rows(102.0)
    assert row["served"][0]["rate"] == 2.0 and row["served"][0]["mean_ms"] == 25.0
    assert row["served"][0]["max_ms"] == 25.0 and row["served"][0]["p99_ms"] <= 25.0
    [(_, row)] = reporter.rows(104.0)  # nothing new: one row saying so...
    assert row["served"][0]["rate"] == 0.0 and row["served"][0]["p50_ms"] is None
    assert reporter.rows(106.0) == []  # ...then nothing


def test_a_latency_quantile_lies_within_its_bucket() -> None:
    histogram = latency.empty()
    for ms in range(1, 1001):  # 1 ms .. 1 s, evenly
        histogram[latency.bucket(ms / 1000)] += 1
    for q in (0.5, 0.9, 0.99):
        found = latency.quantile(histogram, q)
        assert found is not None and abs(found - q) <= q * (latency.GROWTH - 1), (q, found)
    assert latency.quantile(latency.empty(), 0.5) is None
    assert latency.quantile(histogram, 1.0, worst=0.5) == 0.5  # never above the slowest
    assert (
        latency.merged([histogram, histogram])[latency.bucket(0.5)]
        == 2 * histogram[latency.bucket(0.5)]
    )


def _restart(run_dir: Path, node: str) -> dict[str, Any]:
    control = status(run_dir)["control"]
    return request(run_dir, control, {"op": "restart", "node": node, "by": "a test"})


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_a_node_is_restarted_when_asked(
    topo_launch: Callable, tmp_path: Path, backend: str
) -> None:
    path = ticker_topology(tmp_path / "tickers.yaml", count=2)  # no restart policy
    run = topo_launch(path, backend)
    assert run.wait_ready(60)
    before = {n.id: n.pid for n in run.status()}
    answer = _restart(run.run_dir, "ticker/1")
    assert answer == {
        "ok": True,
        "node": "ticker/1",
        "executable": "ticker/1",
        "nodes": ["ticker/1"],
        "message": "",  # a ticker keeps no state: nothing to say of it
    }

    def restarted() -> bool:
        n = {s.id: s for s in run.status()}["ticker/1"]
        return n.restarts == 1 and n.state == "running"

    wait_until(restarted, 60)
    after = {n.id: n.pid for n in run.status()}
    assert after["ticker/0"] == before["ticker/0"]  # the other node is left alone
    if backend == "procs":
        assert after["ticker/1"] != before["ticker/1"]
    assert run.exit_code is None  # the run goes on
    asked = [e for e in events(run.run_dir) if e["kind"] == "restarting"]
    assert asked and asked[-1]["asked"] == "a test" and asked[-1]["node"] == "ticker/1"
    wrong = _restart(run.run_dir, "nobody")
    assert wrong == {"ok": False, "error": "the program has no node 'nobody'"}


@pytest.mark.slow
def test_an_asked_restart_does_not_use_up_the_restart_policy(
    topo_launch: Callable, tmp_path: Path
) -> None:
    """A node with max_restarts 1 restarted by hand twice still restarts after a crash."""
    path = tmp_path / "t.yaml"
    ticker_topology(path, count=1)
    text = path.read_text().replace(
        "count: 1", "count: 1\n    restart: {policy: on-failure, max_restarts: 1}"
    )
    path.write_text(text)
    run = topo_launch(path, "procs")
    assert run.wait_ready(60)
    for i in (1, 2):
        assert _restart(run.run_dir, "ticker/0")["ok"]
        wait_until(
            lambda i=i: run.status()[0].restarts == i and run.status()[0].state == "running", 60
        )
    pid = run.status()[0].pid
    os.kill(pid, signal.SIGKILL)  # a crash: the policy's one restart is still there
    wait_until(lambda: run.status()[0].restarts == 3 and run.status()[0].state == "running", 60)
    said = len(run.log("ticker/0"))
    wait_until(  # the restarted node ticks: the run went on past its restart
        lambda: " tick " in run.log("ticker/0")[said:], 30, what="a tick of the restarted node"
    )
    assert run.exit_code is None
