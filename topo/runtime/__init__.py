"""topo's node runtime: RPC server, handles, registry, lifecycle and batching.

Backends use ``serve_node``/``run_node`` (server), ``Handle`` (client),
``RegistryServer``/``connect_program`` (address book + stop) and
``ProgramContext``/``set_process_program`` (context).
"""

from topo.runtime.addressbook import AddressBook, InProcessAddressBook
from topo.runtime.auth import new_program_id, new_secret
from topo.runtime.batching import batched
from topo.runtime.context import NodeInfo, ProgramContext, node_scope, set_process_program
from topo.runtime.errors import (
    DeadlineExceeded,
    MessageTooLarge,
    NodeBusy,
    PeerUnavailable,
    PermissionDenied,
    RemoteError,
    UnknownMethod,
)
from topo.runtime.handle import Handle, handles
from topo.runtime.lifecycle import current_node, stop, stop_event, wait_for_stop
from topo.runtime.registry import RegistryInfo, RegistryServer
from topo.runtime.registry_client import RegistryClient, connect_program
from topo.runtime.rights import Authority, Grant
from topo.runtime.server import NodeServer, run_node, serve_node

__all__ = [
    "AddressBook",
    "Authority",
    "DeadlineExceeded",
    "Grant",
    "Handle",
    "InProcessAddressBook",
    "MessageTooLarge",
    "NodeBusy",
    "NodeInfo",
    "NodeServer",
    "PeerUnavailable",
    "PermissionDenied",
    "ProgramContext",
    "RegistryClient",
    "RegistryInfo",
    "RegistryServer",
    "RemoteError",
    "UnknownMethod",
    "batched",
    "connect_program",
    "current_node",
    "handles",
    "new_program_id",
    "new_secret",
    "node_scope",
    "run_node",
    "serve_node",
    "set_process_program",
    "stop",
    "stop_event",
    "wait_for_stop",
]
