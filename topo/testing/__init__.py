"""Testing programs and backends with pytest (``pytest_plugins = ["topo.testing"]``).

* the ``topo_launch`` fixture starts programs (threads backend by default, logs under
  the test's ``tmp_path``), stops every one of them at teardown and checks by pid that no
  process it started is left behind::

      def test_producer(topo_launch):
          run = topo_launch("examples/topologies/consumer_producers.yaml", disable_run=True)
          assert run.handle("producer/0").work(1) >= 0

* ``wait_until(condition, timeout)`` waits on the condition a test needs (never for a
  fixed time), ``Events`` is a listener that wakes a test on the event it waits for, and
  ``alive`` / ``wait_gone`` check by pid that processes ended;
* ``BackendSuite`` (``topo.testing.suite``) is the conformance suite every backend
  passes: subclass it with a fixture that says how to run yours (see docs/extending.md).

Node processes import ``topo.testing.nodes`` (the suite's nodes) where pytest may not be
installed: the fixture is then left out.
"""

from __future__ import annotations

from topo.testing.waiting import Events, alive, wait_gone, wait_until

try:
    import pytest  # noqa: F401
except ImportError:  # a node process on a host without pytest
    pass
else:
    from topo.testing.fixtures import topo_launch

__all__ = ["Events", "alive", "topo_launch", "wait_gone", "wait_until"]
