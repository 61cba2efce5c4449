"""Launchpad's API on topo: ``import topo.launchpad as lp`` and Launchpad programs run
unchanged, on threads (``local_mt``, ``test_mt``), processes (``local_mp``,
``test_mp``) or any topo backend, and ``topo export`` turns them into topology files.

    program = lp.Program("consumer_producers")
    with program.group("producer"):
        producers = [program.add_node(lp.CourierNode(Producer)) for _ in range(4)]
    program.add_node(lp.CourierNode(Consumer, producers=producers), label="consumer")
    lp.launch(program, launch_type="local_mp")
"""

from __future__ import annotations

import importlib
from typing import Any

from topo.launchpad import context, flags
from topo.launchpad.address import (
    AbstractAddressBuilder,
    Address,
    SimpleLocalAddressBuilder,
    get_port_from_address,
)
from topo.launchpad.context import is_local_launch, is_local_launch_or_test
from topo.launchpad.flags import launch_type_flag
from topo.launchpad.nodes import (
    CacherNode,
    CourierNode,
    MultiProcessingColocation,
    MultiThreadingColocation,
    Node,
    NodeHandle,
    PyClassNode,
    PyNode,
    ReverbNode,
)
from topo.launchpad.nodes.python.local_multi_processing import PythonProcess
from topo.launchpad.program import Program, make_program
from topo.launchpad.translate import ProgramError, compile_program

# What runs a program is imported on first use: building and translating a program
# (``topo export`` does only that) never loads the launcher and the runtime.
_LAZY = {
    "CourierClient": "topo.runtime.handle:Handle",
    "LaunchType": "topo.launchpad.launch_type",
    "launch": "topo.launchpad.launching",
    "Launched": "topo.launchpad.launched",
    "NodeFailure": "topo.launchpad.launched",
    "make_program_stopper": "topo.launchpad.stopping",
    "register_stop_handler": "topo.launchpad.stopping",
    "stop": "topo.launchpad.stopping",
    "stop_event": "topo.launchpad.stopping",
    "stop_program": "topo.launchpad.stopping",
    "unregister_stop_handler": "topo.launchpad.stopping",
    "wait_for_stop": "topo.launchpad.stopping",
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'topo.launchpad' has no attribute {name!r}")
    module, _, attr = where.partition(":")
    value = getattr(importlib.import_module(module), attr or name)
    globals()[name] = value
    return value


# Launchpad's names for a handle to a node, as programs are built. Inside a node (and
# from handle.dereference()) a handle has become a client: ``lp.CourierClient``, topo's
# ``topo.runtime.handle.Handle`` (loaded on first use, as the launcher is).
Handle = CourierHandle = NodeHandle


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _LaunchTypeFlag:
    """``lp.LAUNCH_TYPE``: ``.value`` is ``--lp_launch_type`` (or TOPO_LP_LAUNCH_TYPE,
    else ``local_mt``), read when asked, as Launchpad's absl flag holder gives it."""

    name = "lp_launch_type"

    @property
    def value(self) -> str:
        return launch_type_flag()

    def __repr__(self) -> str:
        return f"<lp.LAUNCH_TYPE {self.value!r}>"


LAUNCH_TYPE = _LaunchTypeFlag()


class DockerConfig:
    """Launchpad's container settings of a Vertex AI launch, which topo does not run."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise NotImplementedError(
            "lp.DockerConfig configures Launchpad's Vertex AI launches, which topo does not "
            "run: launch on another machine with lp.launch(program, backend='ssh') (or "
            "'ray'), where nodes run in the environment topo starts them in"
        )


def batched_handler(
    batch_size: int, max_parallelism: int = 1, timeout: object = None, pad_batch: bool = False
) -> object:
    """Launchpad's ``lp.batched_handler``: calls to the method are gathered into batches
    of up to ``batch_size`` (see ``topo.batched``); ``timeout`` is a timedelta or ms;
    ``pad_batch`` fills a batch the timeout cut short up to ``batch_size`` (Acme's
    inference server jits its handler for that one shape)."""
    import datetime

    from topo.runtime.batching import batched

    if isinstance(timeout, datetime.timedelta):
        timeout_ms = timeout.total_seconds() * 1000.0
    elif isinstance(timeout, int | float):
        timeout_ms = float(timeout)
    else:
        timeout_ms = 200.0  # Launchpad's default
    return batched(batch_size, timeout_ms, pad=bool(pad_batch))


__all__ = [
    "LAUNCH_TYPE",
    "AbstractAddressBuilder",
    "Address",
    "CacherNode",
    "CourierClient",
    "CourierHandle",
    "CourierNode",
    "DockerConfig",
    "Handle",
    "LaunchType",
    "Launched",
    "MultiProcessingColocation",
    "MultiThreadingColocation",
    "Node",
    "NodeFailure",
    "NodeHandle",
    "Program",
    "ProgramError",
    "PyClassNode",
    "PyNode",
    "PythonProcess",
    "ReverbNode",
    "SimpleLocalAddressBuilder",
    "batched_handler",
    "compile_program",
    "context",
    "flags",
    "get_port_from_address",
    "is_local_launch",
    "is_local_launch_or_test",
    "launch",
    "launch_type_flag",
    "make_program",
    "make_program_stopper",
    "register_stop_handler",
    "stop",
    "stop_event",
    "stop_program",
    "unregister_stop_handler",
    "wait_for_stop",
]
