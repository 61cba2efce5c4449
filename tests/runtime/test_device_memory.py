"""A process given accelerators reports the device memory it holds as metric rows of its
node (``topo.runtime.device_memory``); it says nothing of the CPU and opens no device.
This machine has no accelerator: the rows are checked with the figures given to the
watcher, and JAX on the CPU is checked to say nothing; the figures of a real TPU are
in bench/results/accelerators.md."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.runtime.test_metrics import _Collect
from topo.runtime import RegistryServer, connect_program, device_memory, new_program_id, new_secret

ROOT = Path(__file__).resolve().parents[2]


def test_the_figures_go_out_as_rows_of_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_memory, "EVERY_S", 0.05)
    collect = _Collect()
    reg = RegistryServer(new_program_id(), new_secret(), on_metrics=collect)
    program = connect_program(reg.info)
    stop = threading.Event()
    try:
        figures = {"device_memory_mib": 1536.0, "device_memory_peak_mib": 2048.0}
        thread = device_memory.watch(program.address_book, "learner", stop, lambda: figures)
        assert collect.got.wait(30)
        stop.set()
        thread.join(30)
        from topo.runtime import metrics

        metrics.flush(program.address_book)
        row = collect.rows[0]
        assert row["node"] == "learner" and row["label"] == "device"
        assert row["device_memory_mib"] == 1536.0 and row["device_memory_peak_mib"] == 2048.0
    finally:
        stop.set()
        program.address_book.close()
        reg.close()


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")
def test_nothing_is_said_before_jax_runs_nor_of_the_cpu() -> None:
    code = (
        "import jax\n"
        "from topo.runtime.device_memory import in_use\n"
        "before = in_use()\n"  # imported, no backend started: it opens none
        "from jax._src import xla_bridge\n"
        "assert not xla_bridge.backends_are_initialized()\n"
        "jax.numpy.ones(3).block_until_ready()\n"
        "print(before, in_use())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "None"]
