"""Launchpad's launch types that topo runs on this machine, and the backend of each.
Standard library only: ``lp.context`` and the IR front end may use it without reaching
the launching side."""

from __future__ import annotations

import enum


class LaunchType(enum.Enum):
    """Launchpad's launch types that run on this machine."""

    LOCAL_MULTI_THREADING = "local_mt"
    LOCAL_MULTI_PROCESSING = "local_mp"
    TEST_MULTI_THREADING = "test_mt"
    TEST_MULTI_PROCESSING = "test_mp"

    @property
    def backend(self) -> str:
        """The topo backend this launch type runs on."""
        return "threads" if self.value.endswith("_mt") else "procs"

    @property
    def is_test(self) -> bool:
        """A test launch: stopped by the test case's cleanup, nothing waits at exit."""
        return self.value.startswith("test_")
