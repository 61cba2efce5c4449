"""``topo top RUN``: a live table of a run's nodes -- CPU, memory, calls in and out per
second, the p50 and p99 latency of the calls served, the leading metric's rate -- groups
folded unless expanded, sorted by any column, readable at 80 columns; bad input is one
clear error. The table's rows (``topo.runs.top_rows``) are checked apart."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.cli.operate import run_detached, run_pids, topo
from topo.runs.top_rows import Sampler, group_row, leading_rate, node_row, table_rows
from topo.testing import wait_gone, wait_until

TOPOLOGY = """\
name: calls
nodes:
  server:
    target: tests.cli.top_nodes:Server
    rpc: {threads: 4}
  client:
    target: tests.cli.top_nodes:Client
    count: 3
    args: {server: "@server"}
"""


def _cells(line: str) -> list[str]:
    """The cells of a line of the table (its columns are two spaces apart or more)."""
    return re.split(r"\s{2,}", line.strip())


def _row(table: str, name: str) -> list[str]:
    [line] = [x for x in table.splitlines() if x.strip().startswith(name)]
    return _cells(line)


@pytest.mark.slow
def test_top_shows_each_node_s_calls_latency_and_rate_within_80_columns(tmp_path: Path) -> None:
    file = tmp_path / "calls.yaml"
    file.write_text(TOPOLOGY)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    try:

        def table_with_figures(*args: str) -> str | None:
            shown = topo("top", run_id, "--once", *args, cwd=tmp_path, extra={"COLUMNS": "80"})
            assert shown.returncode == 0, shown.stderr
            server = _row(shown.stdout, "server")
            clients = _row(shown.stdout, "client ×3")
            # node, state, cpu, mem, in/s, out/s, p50, p99, rate
            ready = server[4] != "·" and clients[5] != "·" and clients[8] != "·"
            return shown.stdout if ready else None

        table = wait_until(lambda: table_with_figures(), 60, what="calls and rates in the table")
        assert all(len(line) <= 80 for line in table.splitlines()), table
        assert re.search(r"calls \(\w+\) procs · running · sorted by cpu", table), table
        server = _row(table, "server")
        assert server[1] == "running" and float(server[4]) > 10  # calls served per second
        assert re.fullmatch(r"\d+(\.\d)?ms", server[6]) and re.fullmatch(r"\d+(\.\d)?ms", server[7])
        assert float(server[6][:-2]) >= 1.5  # each call sleeps 2 ms
        assert server[5] == "·"  # it calls nobody
        assert re.fullmatch(r"\d+(\.\d)?[KMG]", server[3]), server  # its memory
        clients = _row(table, "client ×3")
        assert clients[1] == "running" and float(clients[5]) > 10 and float(clients[8]) > 0
        assert clients[4] == "·" and clients[6].endswith("ms")  # serving none: calls made
        assert "rate: client_steps/s" in table
        assert "client/0" not in table  # folded

        expanded = topo("top", run_id, "--once", "-e", "client", "-s", "name", cwd=tmp_path)
        names = [_cells(x)[0] for x in expanded.stdout.splitlines()[2:] if x.strip()]
        assert names[:5] == ["client ×3", "client/0", "client/1", "client/2", "server"], names

        bad = topo("top", run_id, "--sort", "speed", cwd=tmp_path)
        assert bad.returncode == 2 and "--sort speed: expected one of cpu, mem" in bad.stderr
        assert "Traceback" not in bad.stderr
    finally:
        assert topo("stop", run_id, cwd=tmp_path).returncode == 0
        assert not wait_gone(pids, 30)
    ended = topo("top", run_id, cwd=tmp_path)
    assert ended.returncode == 1 and "is not running" in ended.stderr, ended.stderr
    unknown = topo("top", "nosuchrun", cwd=tmp_path)
    assert unknown.returncode == 1 and "no run 'nosuchrun'" in unknown.stderr


def _entry(node: str, group: str, served: float, p50: float, p99: float, **extra: Any) -> Any:
    return {
        "id": node,
        "group": group,
        "state": "running",
        "rpc": {
            "served": [{"method": "m", "rate": served}],
            "made": [],
            "latency": {"served": {"p50_ms": p50, "p99_ms": p99}},
        },
        **extra,
    }


def test_a_group_folds_into_sums_the_median_p50_and_the_worst_p99() -> None:
    nodes = [
        _entry("actor/0", "actor", 10.0, 2.0, 9.0),
        _entry("actor/1", "actor", 20.0, 4.0, 30.0),
        _entry("actor/2", "actor", 30.0, 3.0, 12.0, state="restarting"),
        _entry("learner", "learner", 5.0, 1.0, 50.0),
    ]
    cpu = {"actor/0": 10.0, "actor/1": 20.0, "actor/2": 30.0, "learner": 95.0}

    def figures(entry: Any) -> Any:
        return {"where": "local", "cpu_percent": cpu[entry["id"]], "rss": 1 << 20}

    rows = table_rows(nodes, figures, Sampler(), sort="cpu")
    assert [(r.name, member) for r, member in rows] == [("learner", False), ("actor ×3", False)]
    actors = rows[1][0]
    assert (actors.cpu, actors.mem, actors.calls_in) == (60.0, 3 << 20, 60.0)
    assert (actors.p50_ms, actors.p99_ms) == (3.0, 30.0)
    assert actors.state == "running 2/3"
    by_p99 = table_rows(nodes, figures, Sampler(), sort="p99", expand=frozenset({"actor"}))
    assert [r.name for r, _ in by_p99] == ["learner", "actor ×3", "actor/1", "actor/2", "actor/0"]
    assert [m for _, m in by_p99] == [False, False, True, True, True]


def test_a_counter_s_rate_is_taken_between_two_looks_and_remote_nodes_have_no_cpu() -> None:
    sampler = Sampler()
    metrics = {"actor_steps": 1000, "episode_return": 9.0}
    assert leading_rate("a", metrics, sampler, 100.0) == ("actor_steps/s", None)  # one look
    metrics = {"actor_steps": 1500, "episode_return": 9.5}
    assert leading_rate("a", metrics, sampler, 102.0) == ("actor_steps/s", 250.0)
    for at in range(103, 120):  # no new row for a while: the window smooths it
        assert leading_rate("a", metrics, sampler, float(at))[1] is not None
    later = leading_rate("a", {"actor_steps": 5000}, sampler, 120.0)[1]
    assert later == (5000 - 1500) / (120 - 110)  # over the looks of the last 10 s
    assert leading_rate("a", {"actor_steps": 10}, sampler, 121.0)[1] is None  # restarted
    given = {"learner_steps": 5, "steps_per_s": 41.5}
    assert leading_rate("l", given, sampler, 1.0) == ("steps_per_s", 41.5)  # a rate already
    remote = node_row(
        _entry("n", "n", 1.0, 1.0, 1.0, host="h1"),
        {"where": "remote", "host": "h1"},
        sampler,
        0.0,
    )
    assert (remote.cpu, remote.mem, remote.where, remote.calls_in) == (None, None, "remote", 1.0)
    single = group_row("g", [remote])
    assert single.name == "g ×1" and single.where == "remote"
