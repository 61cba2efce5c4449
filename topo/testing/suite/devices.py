"""Conformance: a process whose nodes ask for no accelerator is CPU-only -- JAX held
to the CPU, CUDA shown no GPU, PyTorch/XLA on the CPU -- set before the node's code
runs, on every host; a group that turns the default off (``cpu_only: false``) sees the
machine as it is. (Which devices a process that asks gets depends on the host's: see
tests/backends/test_device_plan.py and the ssh and Ray tests.)"""

from __future__ import annotations

import os

from topo.backends.devices import CPU_ONLY_ENV
from topo.testing.suite.harness import NODES, Harness

PLATFORMS = f"""
name: platforms
nodes:
  plain: {{target: "{NODES}:Echo", count: 2}}
  free: {{target: "{NODES}:Echo", resources: {{cpu_only: false}}}}
"""


class Devices:
    """The CPU-only default of a process that asks for no accelerator."""

    def test_a_process_that_asks_for_no_accelerator_is_cpu_only(self, suite: Harness) -> None:
        suite.needs("devices")
        run = suite.launch(suite.write(PLATFORMS))
        pids = suite.node_pids(run)
        for node in ("plain/0", "plain/1"):
            assert run.handle(node, timeout=30).devices() == CPU_ONLY_ENV, node
        free = run.handle("free", timeout=30).devices()
        for key in ("CUDA_VISIBLE_DEVICES", "PJRT_DEVICE"):  # the machine's (none here), not topo's
            assert free[key] == os.environ.get(key), free
        assert run.stop(timeout=60) == 0
        suite.assert_nothing_left(run, pids)
