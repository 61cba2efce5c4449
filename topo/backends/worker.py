"""What runs inside one executable: build its nodes from the IR, serve them, run them.

Used by every backend (a thread set in the launcher for ``threads``, a forked
process for ``procs``). Each node gets its own thread and, for ``courier``
nodes, its own RPC server. The executable ends when all its nodes finished,
or at once when one of them fails (exit code 1).
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import traceback
from collections.abc import Callable
from typing import Any

from topo.backends.logs import output_gone
from topo.ir import FrozenMap, Group, GroupRef, Node, Opaque, Program, Ref
from topo.kinds import all_kinds, client_for, get_kind
from topo.runtime import (
    NodeInfo,
    NodeServer,
    ProgramContext,
    callstats,
    node_scope,
    node_state,
    serve_node,
)
from topo.runtime import metrics as node_metrics
from topo.runtime.context import current_node_info, maybe_current_program
from topo.runtime.errors import PeerUnavailable
from topo.runtime.membership import GroupView, Member
from topo.runtime.rights import offering
from topo.targets import load_target

MAX_TRACEBACK = 32_000

# report(kind, node_id, text): kind is "ready", "finished" or "failed" (text: the
# traceback), or "busy" (text: the busy report as JSON, "" once the node answers again).
Report = Callable[[str, str, str], None]


def import_target(target: str) -> Any:
    """Import ``package.module:attr.path`` and return the attribute (see :mod:`topo.targets`)."""
    return load_target(target)


def supported_kinds() -> frozenset[str]:
    """Names of the kinds ``topo run`` can run."""
    return frozenset(k.name for k in all_kinds() if k.runnable is True)


def served_kinds() -> frozenset[str]:
    """Names of the kinds whose built object is served over RPC."""
    return frozenset(k.name for k in all_kinds() if k.served)


def target_modules(program: Program) -> list[str]:
    """The modules of every node's target (what a fork server pre-imports)."""
    supported = supported_kinds()
    modules = {
        program.target_of(n.id).partition(":")[0]
        for n in program.nodes
        if program.kind_of(n.id) in supported
    }
    return sorted(m for m in modules if m)


def resolve(value: Any, deadline: float | None = None, program: Program | None = None) -> Any:
    """IR argument value -> Python value: a ref becomes what the referenced node's kind
    makes of it (a ``Handle`` for courier and cacher nodes), tuples lists, opaque values
    the objects they stand for. A node's ``rpc.call_timeout_s`` is the deadline of calls
    to it, whoever calls."""
    if isinstance(value, Ref):
        if program is None:
            return client_for("courier", value.node, deadline)
        own = program.rpc_of(value.node).call_timeout_s
        return client_for(program.kind_of(value.node), value.node, own or deadline)
    if isinstance(value, Opaque):
        # Imported, or unpickled: the bytes were written by the launcher that compiled this
        # program and reach this process inside the authenticated run, never from a peer.
        return value.load()
    if isinstance(value, GroupRef) and program is not None:
        return group_view(value, deadline, program)
    if isinstance(value, tuple):
        return [resolve(v, deadline, program) for v in value]
    if isinstance(value, FrozenMap):
        return {k: resolve(v, deadline, program) for k, v in value.items()}
    return value


def group_view(ref: GroupRef, deadline: float | None, program: Program) -> GroupView:
    """What ``"@group"`` becomes in a node: the members' clients as a list that the
    process's registry client keeps current while ``topo apply`` changes the group."""
    items = [resolve(r, deadline, program) for r in ref]
    context = maybe_current_program()
    node = current_node_info()

    def build(members: list[Member]) -> list[Any]:
        """Clients for new members, made with the tokens the registry gave for them."""
        out = []
        scope = node_scope(context, node) if context is not None else contextlib.nullcontext()
        with scope, offering({m.node: m.token for m in members}):
            for m in members:
                out.append(client_for(m.kind, m.node, m.call_timeout_s or deadline))
        return out

    view = GroupView(ref.group, items, build)
    views = getattr(context.address_book, "views", None) if context is not None else None
    if views is not None:  # a process of a running program (not a test's bare context)
        views.add(view)
    return view


def node_traceback(exc: BaseException) -> str:
    """The traceback as the user wants it: from their code down, without this module's
    own frames on top (the way pytest hides its internals)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__ and tb.tb_next:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _clean_exit(exc: BaseException, context: ProgramContext) -> bool:
    """Whether a node's exception ends it cleanly: ``SystemExit(0)``, or anything raised
    once the program was asked to stop (a peer gone mid-call, a stop handler's
    ``SystemExit``), as Launchpad counts it. The text still goes to the node's log."""
    stopping = context.stop_event.is_set()
    if isinstance(exc, SystemExit) and exc.code in (0, None):
        return True
    if stopping and isinstance(exc, Exception | SystemExit):
        if output_gone():  # a thread that outlived its run (threads) keeps it to itself
            return True
        if isinstance(exc, PeerUnavailable):  # a peer gone or never up at the stop: expected
            print(f"stopped while calling a peer: {exc}")
        else:
            print(f"raised while the program was stopping (a clean stop):\n{node_traceback(exc)}")
        return True
    return False


def run_one_node(
    program: Program,
    node: Node,
    context: ProgramContext,
    report: Report,
    disable_run: bool = False,
    servers: list[NodeServer] | None = None,
) -> None:
    """Build and run one node in the calling thread; report ready/finished/failed.

    Each server started is appended to ``servers`` so a backend that cannot kill the
    thread (threads backend) can at least close the server when it gives up on it."""
    group: Group = program.group_of(node.id)
    rpc = program.rpc_of(node.id)
    disable_run = disable_run or node.disable_run
    info = NodeInfo(node.id, node.group, node.replica)
    with node_scope(context, info):
        try:
            if node.factory is not None:
                target = node.factory.load()  # pickled by the launcher that compiled this
            else:
                target = import_target(program.target_of(node.id))
            # Its references become handles with the tokens of its grant: the nodes it
            # may call (a handle made any other way holds no right).
            with offering(context.grant.calls if context.grant is not None else {}):
                args = resolve(node.posargs, rpc.deadline_s, program)
                kwargs = resolve(node.args, rpc.deadline_s, program)
            kind = get_kind(program.kind_of(node.id))
            if kind.runnable is not True:
                raise NotImplementedError(f"node kind {kind.name!r} is not supported yet")
            if kind.served:
                obj = target(*args, **kwargs)
                saved = context.address_book.saved_state(node.id)
                if saved is not None:  # resumed, or restarted after a snapshot
                    node_state.restore(obj, node.id, saved)
                    print(f"topo: {node.id} restored its state ({len(saved):,} bytes)")
                server = serve_node(
                    obj,
                    node.id,
                    node.group,
                    node.replica,
                    program=context,
                    threads=rpc.threads,
                    max_message_bytes=int(rpc.max_message_mb * 2**20),
                    on_busy=lambda info: report("busy", node.id, json.dumps(info) if info else ""),
                )
                if servers is not None:
                    servers.append(server)
                report("ready", node.id, "")
                try:
                    run = getattr(obj, "run", None)
                    if callable(run) and not disable_run:
                        run()
                    else:
                        context.stop_event.wait()
                finally:
                    callstats.finish(node.id)  # its last call figures, while it can
                    server.close()
            else:  # called; the result's run() called if it has one
                report("ready", node.id, "")
                result = target(*args, **kwargs)
                run = getattr(result, "run", None)
                if callable(run) and not disable_run:
                    run()
        except BaseException as exc:
            if _clean_exit(exc, context):
                callstats.finish(node.id)
                node_metrics.flush(context.address_book)
                report("finished", node.id, "")
                return
            text = node_traceback(exc)
            if len(text) > MAX_TRACEBACK:
                text = "... (truncated)\n" + text[-MAX_TRACEBACK:]
            callstats.finish(node.id)
            node_metrics.flush(context.address_book)  # the process may end right after the report
            report("failed", node.id, text)
            return
        callstats.finish(node.id)
        node_metrics.flush(context.address_book)
        report("finished", node.id, "")
        if group.stops_program and not context.stop_event.is_set():
            context.address_book.request_stop(f"{node.id} finished (stops_program)", node.id)


def run_executable(
    program: Program,
    exe_id: str,
    context: ProgramContext,
    report: Report,
    disable_run: bool = False,
    servers: list[NodeServer] | None = None,
) -> int:
    """Run every node of ``exe_id`` as a thread; 0 when all finished, 1 when one failed."""
    from topo.runtime import debugger

    debugger.install()  # breakpoint() in a node stops it for topo debug
    exe = program.executable_index[exe_id]
    outcomes: queue.Queue[bool] = queue.Queue()

    def node_main(node: Node) -> None:
        failed = False

        def tracking_report(kind: str, node_id: str, text: str) -> None:
            nonlocal failed
            failed = failed or kind == "failed"
            report(kind, node_id, text)

        try:
            run_one_node(program, node, context, tracking_report, disable_run, servers)
        finally:
            outcomes.put(not failed)

    for node_id in exe.nodes:
        node = program.node(node_id)
        threading.Thread(
            target=node_main, args=(node,), name=f"topo-node-{node_id}", daemon=True
        ).start()
    for _ in exe.nodes:
        if not outcomes.get():
            return 1
    return 0
