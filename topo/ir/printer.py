"""A compact text form of the IR, one line per executable and node (like a jaxpr)."""

from __future__ import annotations

from topo.ir.program import Program, SnapshotSettings
from topo.ir.values import FrozenMap, Opaque, Ref, Value


def format_value(value: Value, limit: int = 6) -> str:
    """``@node`` for refs, the description for opaque values (``<function f from m>``);
    long lists shortened to their first items."""
    if isinstance(value, Ref):
        return f"@{value.node}"
    if isinstance(value, Opaque):
        return value.description
    if isinstance(value, tuple):
        items = [format_value(v, limit) for v in value[:limit]]
        if len(value) > limit:
            items.append(f"... {len(value) - limit} more")
        return "[" + ", ".join(items) + "]"
    if isinstance(value, FrozenMap):
        return "{" + ", ".join(f"{k}: {format_value(v, limit)}" for k, v in value.items()) + "}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)


def format_snapshots(settings: SnapshotSettings) -> str:
    """``every 600s, keep 3, at stop, pause timeout 30s``: when snapshots are taken."""
    when = [f"every {settings.every_s:g}s"] if settings.every_s is not None else []
    when += ["at stop"] if settings.at_stop else []
    keep = f"keep {settings.keep}"
    pause = f"pause timeout {settings.pause_timeout_s:g}s"
    return ", ".join([*(when or ["only when asked"]), keep, pause])


def format_program(program: Program) -> str:
    """The whole program: header, then each executable with the nodes it runs."""
    lines = [
        f"program {program.name}  (ir v{program.version}, seed {program.seed}, "
        f"{len(program.nodes)} nodes, {len(program.executables)} executables, "
        f"{len(program.edges)} edges)"
    ]
    if program.snapshots != SnapshotSettings():
        lines.append(f"  snapshots: {format_snapshots(program.snapshots)}")
    disabled = [g.name for g in program.groups if not g.enabled]
    if disabled:
        lines.append(f"  disabled: {', '.join(disabled)}")
    for exe in program.executables:
        where = f"  host set {exe.placement}" if exe.placement else ""
        threads = f", {len(exe.nodes)} threads" if len(exe.nodes) > 1 else ""
        lines.append(f"  exe {exe.id}  [{exe.mode}{threads}]{where}")
        for node_id in exe.nodes:
            node = program.node(node_id)
            parts = [format_value(v) for v in node.posargs]
            parts += [f"{k}={format_value(v)}" for k, v in node.args.items()]
            target = node.factory.description if node.factory else program.target_of(node_id)
            flags = "  run disabled" if node.disable_run else ""
            lines.append(
                f"    {node.id} = {program.kind_of(node_id)} {target}({', '.join(parts)})"
                f"  seed={node.seed}{flags}"
            )
    return "\n".join(lines)
