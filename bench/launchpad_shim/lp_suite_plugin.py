"""pytest plugin of ``bench/launchpad_suite.py``: the tests of a Launchpad test file that
use Launchpad's internals (``$LP_SUITE_INTERNALS``, a JSON map of test name -> what
internal it uses) are skipped with that reason, which the suite reports as "uses
internals". absl's flags are marked parsed, as ``absltest.main()`` does, and a skip
mark of a base class is not inherited by the test classes made from it."""

from __future__ import annotations

import json
import os
import re
import unittest
from typing import Any

import pytest

INTERNALS_PREFIX = "uses internals: "


def _internals() -> dict[str, str]:
    return dict(json.loads(os.environ.get("LP_SUITE_INTERNALS", "{}")))


def pytest_configure(config: pytest.Config) -> None:
    """absl's flags count as parsed, as ``absltest.main()`` leaves them (test code reads
    Launchpad's flags, e.g. ``FLAGS.lp_worker_manager_v2``)."""
    from absl import flags

    flags.FLAGS.mark_as_parsed()


def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: Any) -> None:
    """A test class runs although its base class is marked skip: unittest would inherit
    the skip (Launchpad's ``@absltest.skip('base class')`` mixins then never run), but
    the mark is meant for the base alone."""
    if (
        isinstance(obj, type)
        and issubclass(obj, unittest.TestCase)
        and "__unittest_skip__" not in vars(obj)
        and getattr(obj, "__unittest_skip__", False)
    ):
        obj.__unittest_skip__ = False  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test that uses internals (a parameterized one by its base name)."""
    internals = _internals()
    for item in items:
        base = re.sub(r"\d+$", "", item.name)
        why = internals.get(item.name) or internals.get(base)
        if why:
            item.add_marker(pytest.mark.skip(reason=INTERNALS_PREFIX + why))
