"""The module map of the ``launchpad`` shim: which of topo's public objects each
Launchpad module path the Launchpad test files import stands for.

Every entry builds a Launchpad module out of ``topo.launchpad``'s public names; nothing
of Launchpad is reimplemented. A Launchpad module with no entry (its launcher's worker
managers, signal handling, ...) is internals: importing it raises an ImportError that
says so. Test files (``*_test``) and ``launchpad.examples`` are loaded from the Launchpad
checkout named by ``$LAUNCHPAD_CHECKOUT``.
"""

from __future__ import annotations

import functools
import importlib
import types
from collections.abc import Callable

Builder = Callable[[types.ModuleType], None]


def _public(source: str) -> Builder:
    """The public names of topo module ``source``."""

    def build(module: types.ModuleType) -> None:
        topo_module = importlib.import_module(source)
        names = getattr(topo_module, "__all__", None) or [
            n for n in vars(topo_module) if not n.startswith("_")
        ]
        for name in names:
            setattr(module, name, getattr(topo_module, name))

    return build


def _names(**where: str) -> Builder:
    """``name="topo.module:attr"`` for each name (``"topo.launchpad:launch"``)."""

    def build(module: types.ModuleType) -> None:
        for name, path in where.items():
            source, _, attr = path.partition(":")
            setattr(module, name, getattr(importlib.import_module(source), attr))

    return build


def _both(*builders: Builder) -> Builder:
    def build(module: types.ModuleType) -> None:
        for b in builders:
            b(module)

    return build


def _launcher(launch_type: str) -> Builder:
    """A ``launchpad.launch.<launch type>.launch`` module: its ``launch`` is ``lp.launch``
    with that launch type; ``worker_manager`` is the stop API Launchpad's tests reach
    through it (``launch.worker_manager.wait_for_stop()``)."""

    def build(module: types.ModuleType) -> None:
        import topo.launchpad as lp

        vars(module).update(
            launch=functools.partial(lp.launch, launch_type=launch_type),
            worker_manager=importlib.import_module("launchpad.launch.worker_manager"),
            worker_manager_v2=importlib.import_module("launchpad.launch.worker_manager_v2"),
        )

    return build


def _bind_addresses(module: types.ModuleType) -> None:
    """``address_builder.bind_addresses(nodes)``: every address of the nodes bound to a
    free local port, with topo's public ``Address.bind`` and ``SimpleLocalAddressBuilder``."""
    import topo.launchpad as lp

    def bind_addresses(nodes: list[lp.Node]) -> None:
        for node in nodes:
            for address in node.addresses:
                address.bind(lp.SimpleLocalAddressBuilder())

    vars(module)["bind_addresses"] = bind_addresses


_STOP_API = _names(
    wait_for_stop="topo.launchpad:wait_for_stop",
    stop_event="topo.launchpad:stop_event",
    register_stop_handler="topo.launchpad:register_stop_handler",
    unregister_stop_handler="topo.launchpad:unregister_stop_handler",
)
_NOTHING: Builder = _names()

# Launchpad module -> how its shim module is built. Packages on the way to a module are
# listed too (an empty package where Launchpad's holds nothing the tests name).
MODULES: dict[str, Builder] = {
    "launchpad.program": _public("topo.launchpad.program"),
    "launchpad.context": _public("topo.launchpad.context"),
    "launchpad.flags": _both(
        _public("topo.launchpad.flags"), _names(LAUNCH_TYPE="topo.launchpad:LAUNCH_TYPE")
    ),
    "launchpad.address": _public("topo.launchpad.address"),
    "launchpad.nodes": _NOTHING,
    "launchpad.nodes.base": _public("topo.launchpad.nodes.base"),
    "launchpad.nodes.python": _NOTHING,
    "launchpad.nodes.python.node": _names(
        PyNode="topo.launchpad:PyNode", PyClassNode="topo.launchpad:PyClassNode"
    ),
    "launchpad.nodes.python.local_multi_processing": _public(
        "topo.launchpad.nodes.python.local_multi_processing"
    ),
    "launchpad.nodes.python.xm_docker": _names(DockerConfig="topo.launchpad:DockerConfig"),
    "launchpad.nodes.courier": _NOTHING,
    "launchpad.nodes.courier.node": _names(
        CourierNode="topo.launchpad:CourierNode",
        CourierHandle="topo.launchpad:CourierHandle",
        CourierClient="topo.launchpad:CourierClient",
    ),
    "launchpad.nodes.courier.courier_utils": _names(
        batched_handler="topo.launchpad:batched_handler"
    ),
    "launchpad.nodes.reverb": _NOTHING,
    "launchpad.nodes.reverb.node": _names(
        ReverbNode="topo.launchpad:ReverbNode",
        ReverbHandle="topo.launchpad.nodes:ReverbHandle",
    ),
    "launchpad.nodes.cacher": _NOTHING,
    "launchpad.nodes.cacher.node": _names(CacherNode="topo.launchpad:CacherNode"),
    "launchpad.nodes.multi_threading_colocation": _NOTHING,
    "launchpad.nodes.multi_threading_colocation.node": _names(
        MultiThreadingColocation="topo.launchpad:MultiThreadingColocation"
    ),
    "launchpad.nodes.multi_processing_colocation": _NOTHING,
    "launchpad.nodes.multi_processing_colocation.node": _names(
        MultiProcessingColocation="topo.launchpad:MultiProcessingColocation"
    ),
    "launchpad.launch": _NOTHING,
    "launchpad.launch.launch": _names(launch="topo.launchpad:launch"),
    "launchpad.launch.serialization": _public("topo.launchpad.serialization"),
    "launchpad.launch.worker_manager": _STOP_API,
    "launchpad.launch.worker_manager_v2": _STOP_API,
    "launchpad.launch.worker_manager_migration": _STOP_API,
    "launchpad.launch.test_multi_threading": _NOTHING,
    "launchpad.launch.test_multi_threading.launch": _launcher("test_mt"),
    "launchpad.launch.test_multi_threading.address_builder": _bind_addresses,
    "launchpad.launch.test_multi_processing": _NOTHING,
    "launchpad.launch.test_multi_processing.launch": _launcher("test_mp"),
    "launchpad.launch.local_multi_threading": _NOTHING,
    "launchpad.launch.local_multi_threading.launch": _launcher("local_mt"),
    "launchpad.launch.local_multi_processing": _NOTHING,
    "launchpad.launch.local_multi_processing.launch": _launcher("local_mp"),
    "launchpad.program_stopper": _NOTHING,
    "launchpad.program_stopper.program_stopper": _names(
        make_program_stopper="topo.launchpad:make_program_stopper"
    ),
    "launchpad.stop_program": _NOTHING,
    "launchpad.stop_program.stop": _names(stop="topo.launchpad:stop"),
}

# Modules that have no topo counterpart, and why (the ImportError says it).
UNMAPPED: dict[str, str] = {
    "courier.python": "courier's own RPC client and server bound to an address; topo's "
    "handles reach nodes by id, and topo has no public server or client of an address",
    "launchpad.launch.signal_handling": "Launchpad's launcher internals (topo's launcher "
    "handles signals itself)",
    "launchpad.launch.run_locally": "Launchpad's terminal launchers (topo prefixes node "
    "output itself)",
}
