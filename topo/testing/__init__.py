"""Testing programs and backends with pytest (``pytest_plugins = ["topo.testing"]``).

* the ``topo_launch`` fixture starts programs (threads backend by default, logs under
  the test's ``tmp_path``), stops every one of them at teardown and checks by pid that no
  process it started is left behind::

      def test_producer(topo_launch):
          run = topo_launch("examples/topologies/consumer_producers.yaml", disable_run=True)
          assert run.handle("producer/0").work(1) >= 0

* ``wait_until(condition, timeout)`` waits on the condition a test needs (never for a
  fixed time), ``Events`` is a listener that wakes a test on the event it waits for,
  ``Lines`` wakes it on a line of a process's output, ``wait_for_text`` on a file's text,
  and ``alive`` / ``wait_gone`` check by pid that processes ended;
* ``BackendSuite`` (``topo.testing.suite``) is the conformance suite every backend
  passes: subclass it with a fixture that says how to run yours (see docs/extending.md).

Node processes import ``topo.testing.nodes`` (the suite's nodes), on hosts that may not
have pytest: the fixture is defined only where pytest runs (it is imported before its
plug-ins), so a node process imports neither pytest nor the launcher's side of topo.
"""

from __future__ import annotations

import sys

from topo.testing.waiting import (
    Events,
    Lines,
    alive,
    read_until,
    wait_for_text,
    wait_gone,
    wait_until,
)

if "pytest" in sys.modules:  # loaded as pytest's plug-in, or from a conftest
    from topo.testing.fixtures import topo_launch

__all__ = [
    "Events",
    "Lines",
    "alive",
    "read_until",
    "topo_launch",
    "wait_for_text",
    "wait_gone",
    "wait_until",
]
