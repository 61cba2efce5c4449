"""A 5-second chaos run (bench/chaos_bench.py in small): 3 nodes, one ``kill -9`` a second,
callers calling throughout. No call may hang past its deadline, most succeed, nothing is
left behind."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:  # chaos_bench must import here and in the fork server
    sys.path.insert(0, str(BENCH))


@pytest.mark.slow
def test_mini_chaos_no_hung_call_most_succeed_no_orphans(tmp_path: Path) -> None:
    from chaos_bench import chaos

    res = chaos(nodes=3, duration=5, interval=1, deadline=2, clients=1, log_dir=tmp_path)
    assert res["kills"] >= 4, res
    assert res["hung"] == 0, res
    assert res["success_pct"] > 50, res
    assert res["restarts"] >= 1, res
    assert res["all_nodes_answer_after"] and res["exit_code"] == 0, res
    assert res["orphans"] == [], res
