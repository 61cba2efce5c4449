"""Launchpad's ``launchpad.context``: launch types and the per-node launch context.

topo does not hand nodes a Launchpad launch context: a node that needs to stop the
program calls ``lp.stop()``; ``get_context()`` says so unless ``set_context`` was called."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from topo.launchpad.launch_type import LaunchType

_LOCAL = ("local_mt", "local_mp")
_TESTS = ("test_mt", "test_mp")
_ELSEWHERE = ("local_docker", "vertex_ai")


def _value(launch_type: Any) -> str:
    """The launch type's text, checked against the launch types topo runs."""
    if isinstance(launch_type, LaunchType):
        return launch_type.value
    if launch_type in _ELSEWHERE:  # Launchpad's, run elsewhere: neither local nor a test
        return str(launch_type)
    return LaunchType(launch_type).value


def is_local_launch(launch_type: Any) -> bool:
    """True for ``local_mt`` and ``local_mp`` (a ``LaunchType`` or its text)."""
    return _value(launch_type) in _LOCAL


def is_local_launch_or_test(launch_type: Any) -> bool:
    """True for the local launch types and the test ones (``test_mt``, ``test_mp``)."""
    return _value(launch_type) in _LOCAL + _TESTS


class LaunchContext:
    """A node's launch type, launch config and program stopper, once initialized."""

    def __init__(self) -> None:
        self._launch_type: Any = None
        self._launch_config: Any = None
        self._program_stopper: Callable[[], None] | None = None
        self._initialized = False

    def _check(self) -> None:
        if not self._initialized:
            raise RuntimeError(
                "Launch context is not yet initialized: call initialize() first "
                "(topo does not initialize one for its nodes)"
            )

    @property
    def launch_type(self) -> Any:
        """The launch type given to :meth:`initialize`."""
        self._check()
        return self._launch_type

    @property
    def launch_config(self) -> Any:
        """The launch config given to :meth:`initialize`."""
        self._check()
        return self._launch_config

    @property
    def program_stopper(self) -> Callable[[], None] | None:
        """The stopper given to :meth:`initialize`."""
        self._check()
        return self._program_stopper

    def initialize(
        self,
        launch_type: Any,
        launch_config: Any,
        program_stopper: Callable[[], None] | None = None,
    ) -> None:
        """Set what the properties return."""
        self._launch_type = launch_type
        self._launch_config = launch_config
        self._program_stopper = program_stopper
        self._initialized = True


_local = threading.local()


def get_context() -> LaunchContext:
    """The launch context set on this thread with :func:`set_context`."""
    context = getattr(_local, "context", None)
    if context is None:
        raise RuntimeError(
            "no Launchpad launch context on this thread: topo does not set one in its "
            "nodes; to stop the program from a node call lp.stop(), and read the launch "
            "type with lp.LAUNCH_TYPE.value"
        )
    return context


def set_context(context: LaunchContext) -> None:
    """Make ``context`` this thread's launch context."""
    _local.context = context
