"""topo's Python API: ``load`` a topology, ``launch`` a program, talk to its nodes.

The counterpart of Launchpad's ``launch_type='test_mt'``::

    with topo.launch("examples/topologies/consumer_producers.yaml", disable_run=True) as run:
        assert run.handle("producer/0").work(3) >= 0

``load`` (``loading``) is also what every CLI command loads a file with; ``launch``,
``prepare`` and ``start`` (``launching``) are the one way a run is made and started;
``RunningProgram`` (``running``) is the started program. This package imports the
runtime (zmq) only when a program is launched, so loading stays light.
"""

from __future__ import annotations

from topo.api.launching import launch, prepare, start
from topo.api.loading import Loaded, ProgramSource, load
from topo.api.running import ApplyNeedsConfirmation, ApplyRefused, Change, RunningProgram

__all__ = [
    "ApplyNeedsConfirmation",
    "ApplyRefused",
    "Change",
    "Loaded",
    "ProgramSource",
    "RunningProgram",
    "launch",
    "load",
    "prepare",
    "start",
]
