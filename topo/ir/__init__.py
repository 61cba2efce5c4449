"""The Program IR: what the compiler produces and every backend and renderer reads.

It imports nothing from topo but itself and :mod:`topo.diagnostics` (whence
:class:`SourcePos`, re-exported here for compatibility).
"""

from topo.ir.codec import (
    IRFormatError,
    IRVersionError,
    dumps,
    loads,
    program_from_dict,
    program_to_dict,
)
from topo.ir.program import (
    DEFAULT_READY_TIMEOUT_S,
    DEFAULT_STALL_AFTER_S,
    IR_VERSION,
    Accelerators,
    Edge,
    Executable,
    Group,
    Node,
    Program,
    Resources,
    RestartPolicy,
    RpcSettings,
    SnapshotSettings,
    SourcePos,
    StopSettings,
)
from topo.ir.values import FrozenMap, GroupRef, Opaque, Ref, Value, freeze, iter_refs, thaw

__all__ = [
    "DEFAULT_READY_TIMEOUT_S",
    "DEFAULT_STALL_AFTER_S",
    "IR_VERSION",
    "Accelerators",
    "Edge",
    "Executable",
    "FrozenMap",
    "Group",
    "GroupRef",
    "IRFormatError",
    "IRVersionError",
    "Node",
    "Opaque",
    "Program",
    "Ref",
    "Resources",
    "RestartPolicy",
    "RpcSettings",
    "SnapshotSettings",
    "SourcePos",
    "StopSettings",
    "Value",
    "dumps",
    "freeze",
    "iter_refs",
    "loads",
    "program_from_dict",
    "program_to_dict",
    "thaw",
]
