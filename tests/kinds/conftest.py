"""kind_plugin (the test-only node kind) must import in the test process and its workers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


@pytest.fixture
def greeter() -> Iterator[None]:
    """The test kind ``greeter`` registered for one test, unregistered afterwards."""
    from kind_plugin import GREETER

    from topo.kinds import register_kind, unregister_kind

    register_kind(GREETER)
    yield
    unregister_kind("greeter")
