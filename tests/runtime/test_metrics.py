"""``topo.metrics`` loggers (node side), the registry's ``metrics`` RPC and the launcher's
store, each on its own: real registry, real sockets, real files."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import topo
from topo.runs.figures import rank_keys
from topo.runtime import NodeInfo, RegistryServer, connect_program, new_program_id, new_secret
from topo.runtime import metrics as node_metrics
from topo.runtime.context import node_scope
from topo.runtime.registry import MAX_METRIC_ROWS
from topo.supervisor.metrics_store import MetricsStore, check_row, metrics_path


def test_rows_are_stamped_and_numpy_scalars_become_plain_values() -> None:
    log = topo.metrics.logger("actor")
    before = time.time()
    log.write(
        {
            "episode_return": np.float32(187.5),
            "actor_steps": np.int64(1200),
            "done": np.bool_(True),
            "loss": np.array(0.25),
            "nan": float("nan"),
            "phase": "warmup",
            "none": None,
        }
    )
    (row,) = log.rows  # outside a program the rows stay in memory
    assert before <= row["time"] <= time.time()
    assert row["label"] == "actor" and "node" not in row
    assert row["episode_return"] == 187.5 and type(row["episode_return"]) is float
    assert row["actor_steps"] == 1200 and type(row["actor_steps"]) is int
    assert row["done"] is True and row["loss"] == 0.25
    assert row["nan"] == "nan" and row["phase"] == "warmup" and row["none"] is None
    json.dumps(row, allow_nan=False)  # every value is plain JSON


@pytest.mark.parametrize(
    ("value", "kind"),
    [([1, 2], "list"), ({"a": 1}, "dict"), (np.zeros(3), "ndarray"), (object(), "object")],
)
def test_non_scalars_are_refused_with_a_clear_type_error(value: Any, kind: str) -> None:
    log = topo.metrics.logger()
    with pytest.raises(TypeError, match=f"metric 'bad' must be a number.*got {kind}"):
        log.write({"ok": 1.0, "bad": value})
    assert log.rows == []


def test_reserved_keys_and_long_strings_are_refused() -> None:
    log = topo.metrics.logger()
    with pytest.raises(ValueError, match=r"\['node', 'time'\] are reserved"):
        log.write({"time": 1.0, "node": "x"})
    with pytest.raises(ValueError, match="string of 5000 characters"):
        log.write({"note": "x" * 5000})
    log.write({"fine": 1})  # a refused row does not count for every_s either
    assert len(log.rows) == 1


def test_every_s_skips_rows_written_too_soon() -> None:
    log = topo.metrics.logger(every_s=0.3)
    for i in range(5):
        log.write({"i": i})
    assert [r["i"] for r in log.rows] == [0]
    time.sleep(0.35)
    log.write({"i": 5})
    assert [r["i"] for r in log.rows] == [0, 5]


def test_batches_stay_under_the_registrys_caps() -> None:
    rows = [{"time": 1.0, "node": "a", "i": i} for i in range(1200)]
    parts = node_metrics.batches(rows)
    assert [len(p) for p in parts] == [500, 500, 200]
    wide = [{"time": 1.0, "node": "a", "s": "x" * 900} for _ in range(400)]
    assert all(
        sum(len(r["s"]) for r in p) <= node_metrics.BATCH_BYTES for p in node_metrics.batches(wide)
    )
    assert sum(len(p) for p in node_metrics.batches(wide)) == 400


class _Collect:
    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.over = 0
        self.got = threading.Event()

    def __call__(self, rows: list[Any], over: int) -> None:
        self.rows.extend(rows)
        self.over += over
        self.got.set()


def test_a_nodes_rows_reach_the_registry_in_order_with_its_id() -> None:
    collect = _Collect()
    reg = RegistryServer(new_program_id(), new_secret(), on_metrics=collect)
    program = connect_program(reg.info)
    try:
        with node_scope(program, NodeInfo("actor/3", "actor", 3)):
            log = topo.metrics.logger("train")
            for i in range(700):
                log.write({"step": i, "episode_return": float(i)})
            assert log.rows == []  # shipped, not kept
            node_metrics.flush()  # what the worker does when a node ends
        assert [r["step"] for r in collect.rows] == list(range(700))
        assert {r["node"] for r in collect.rows} == {"actor/3"}
        assert {r["label"] for r in collect.rows} == {"train"}
    finally:
        program.address_book.close()
        reg.close()


def test_the_registry_caps_rows_per_call_and_passes_the_count_on() -> None:
    collect = _Collect()
    reg = RegistryServer(new_program_id(), new_secret(), on_metrics=collect)
    program = connect_program(reg.info)
    try:
        rows = [{"time": 1.0, "node": "a", "i": i} for i in range(MAX_METRIC_ROWS + 5)]
        program.address_book.metrics(rows)  # type: ignore[attr-defined]
        assert len(collect.rows) == MAX_METRIC_ROWS and collect.over == 5
        program.address_book.metrics("not a list")  # type: ignore[attr-defined, arg-type]
        assert collect.rows[-1] == "not a list"  # handed on, for the store to drop and count
    finally:
        program.address_book.close()
        reg.close()


class _Held(_Collect):
    """A launcher's metrics handler that takes its first call and holds it until let go."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.go = threading.Event()

    def __call__(self, rows: list[Any], over: int) -> None:
        self.entered.set()
        self.go.wait()  # (the test lets it go in its finally)
        super().__call__(rows, over)


def _write(program: Any, node: str, count: int) -> None:
    with node_scope(program, NodeInfo(node, node, None)):
        log = topo.metrics.logger("train")
        for i in range(count):
            log.write({"step": i})


def test_a_slow_launcher_holds_up_only_its_own_programs_rows() -> None:
    """A node ending flushes its own program's rows at once, while the sender is held by
    another program's launcher (gone or slow): the threads backend runs programs one
    after another in one process, and a node of the next one must not wait out the old
    one's call timeout (seen: a run's nodes ended a minute late, a node killed at a
    1 s grace)."""
    held, collect = _Held(), _Collect()
    slow = RegistryServer(new_program_id(), new_secret(), on_metrics=held)
    live = RegistryServer(new_program_id(), new_secret(), on_metrics=collect)
    old, new = connect_program(slow.info), connect_program(live.info)
    sender = threading.Thread(target=node_metrics.flush, daemon=True)  # every program's
    try:
        _write(old, "old", 3)
        sender.start()
        assert held.entered.wait(30)  # the sender is inside the old program's call
        _write(new, "learner", 5)
        node_metrics.flush(new.address_book)  # what the worker does as a node ends
        assert [r["step"] for r in collect.rows] == list(range(5))
        assert not held.rows  # the old program's call is still held
        # (its sender may have given up by now: a metrics call waits at most 10 s)
    finally:
        held.go.set()
        sender.join(30)
        for program in (old, new):
            program.address_book.close()
        slow.close()
        live.close()
    assert [r["step"] for r in held.rows] == list(range(3))  # it had its rows, in the end


def test_rows_of_a_program_this_process_left_are_dropped() -> None:
    """Rows queued (or written later, by a thread left behind) for a program this process
    has left have no launcher to go to: they are dropped, not sent to time out."""
    collect = _Collect()
    reg = RegistryServer(new_program_id(), new_secret(), on_metrics=collect)
    program = connect_program(reg.info)
    try:
        _write(program, "actor/0", 4)
        program.address_book.close()  # the process leaves the program
        _write(program, "actor/0", 2)
        node_metrics.flush()
        assert collect.rows == []
        other = connect_program(reg.info)  # the program itself is still served
        try:
            _write(other, "actor/1", 1)
            node_metrics.flush(other.address_book)
            assert [r["node"] for r in collect.rows] == ["actor/1"]
        finally:
            other.address_book.close()
    finally:
        reg.close()


# --- the launcher's store ---------------------------------------------------------------

NODES = {"actor/0": None, "learner": None}


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ("text", "must be a dict"),
        ({"time": 1.0, "node": "ghost"}, "'ghost' is not a node"),
        ({"time": 1.0}, "None is not a node"),
        ({"time": "now", "node": "learner"}, "is not a number"),
        ({"time": float("inf"), "node": "learner"}, "is not a number"),
        ({"time": 1.0, "node": "learner", "x": [1]}, "'x' is a list, not a scalar"),
        ({"time": 1.0, "node": "learner", 3: 1}, "key 3 must be"),
        ({"time": 1.0, "node": "learner", "s": "y" * 2000}, "string of 2000"),
        ({"time": 1.0, "node": "learner", **{f"k{i}": i for i in range(200)}}, "keys"),
    ],
)
def test_check_row_names_what_is_wrong(row: Any, problem: str) -> None:
    reason = check_row(row, NODES)
    assert reason is not None and problem in reason
    assert check_row({"time": 1, "node": "learner", "a": None, "b": True, "c": "x"}, NODES) is None


def test_store_appends_per_node_files_merges_latest_and_drops_bad_rows(tmp_path: Path) -> None:
    warnings: list[str] = []
    store = MetricsStore(tmp_path, NODES, warnings.append)
    rows = [
        {"time": 1.0, "node": "actor/0", "label": "a", "episode_return": 1.0, "steps": 10},
        {"time": 2.0, "node": "ghost", "x": 1},
        {"time": 3.0, "node": "actor/0", "label": "a", "loss": float("nan")},
        {"time": 4.0, "node": "learner", "loss": 0.5, "x": [1]},
    ]
    assert store.add(rows) == ["actor/0"]
    assert store.add([{"time": 5.0, "node": "actor/0", "episode_return": 2.0}], over=7) == [
        "actor/0"
    ]
    lines = metrics_path(tmp_path, "actor/0").read_text().splitlines()
    assert metrics_path(tmp_path, "actor/0").name == "actor_0.jsonl"
    assert [json.loads(line)["time"] for line in lines] == [1.0, 3.0, 5.0]
    assert json.loads(lines[1])["loss"] == "nan"  # strict JSON on disk
    assert store.latest["actor/0"] == {"episode_return": 2.0, "steps": 10, "loss": "nan"}
    assert not metrics_path(tmp_path, "learner").exists()
    assert store.rows == 3 and store.dropped == 2 + 7
    assert len(warnings) == 1 and "'ghost' is not a node" in warnings[0]
    store.close()
    assert store.add(rows[:1]) == []  # after the run: ignored


def test_store_caps_the_string_characters_of_one_batch(tmp_path: Path) -> None:
    store = MetricsStore(tmp_path, NODES, lambda _: None)
    rows = [{"time": float(i), "node": "learner", "s": "z" * 1000} for i in range(300)]
    store.add(rows)
    assert store.rows == 260 and store.dropped == 40  # 256 KiB of strings (node ids too)
    store.close()


def test_rank_keys_puts_key_figures_first() -> None:
    keys = ["lr", "actor_steps", "loss", "episode_return", "steps_per_s", "mean_reward"]
    assert rank_keys(keys) == [
        "episode_return",
        "mean_reward",
        "loss",
        "steps_per_s",
        "actor_steps",
        "lr",
    ]
