"""A :class:`~topo.ir.diff.ProgramDiff` as a plan to read (``topo diff``) and as JSON
(``topo diff --json``; the shape is in :mod:`topo.ir.diff`'s docstring).

The plan is grouped by group; a line starts with ``+`` (added, starts), ``~`` (changed)
or ``-`` (removed, stops). Nodes of a group that change the same way share one line
(``~ actor/0..7  num_actors: 2 → 8``), so a 1,000-node count change stays a few lines.
"""

from __future__ import annotations

import re
from typing import Any

from topo.ir.diff import Change, ExecutableDiff, GroupDiff, ProgramDiff
from topo.ir.printer import format_value
from topo.ir.values import Value, to_json

ARROW = "→"
INDENT = "    "
_REPLICA = re.compile(r"^(.*)/(\d+)$")


def format_diff(diff: ProgramDiff) -> str:
    """The plan: program changes, then each group, then executables, then a summary."""
    if diff.equal:
        return "No differences."
    lines: list[str] = []
    if diff.program:
        lines.append("~ program")
        for change in diff.program:
            lines.append(INDENT + _setting_line(change, quoted=change.path.startswith("params.")))
    for group in diff.groups:
        lines += _group_lines(group)
    shown = [e for e in diff.executables if _worth_showing(e)]
    if shown:
        lines.append("executables")
        lines += [INDENT + _executable_line(e) for e in shown]
    lines.append(summary(diff))
    return "\n".join(lines)


def summary(diff: ProgramDiff) -> str:
    """``Plan: 1 group changed, 1 added; 6 nodes to start, 2 to restart, 0 to stop.``"""
    counts = {op: sum(1 for g in diff.groups if g.op == op) for op in "~+-"}
    words = [(counts["~"], "changed"), (counts["+"], "added"), (counts["-"], "removed")]
    parts = [f"{n} {what}" for n, what in words if n]
    if parts:
        first = parts[0].split(" ", 1)
        parts[0] = f"{first[0]} group{'s' if int(first[0]) > 1 else ''} {first[1]}"
    elif diff.program:
        parts = ["program settings changed"]
    else:
        parts = ["executables changed"]
    nodes = (
        f"{len(diff.start)} node{'s' if len(diff.start) != 1 else ''} to start, "
        f"{len(diff.restart)} to restart, {len(diff.stop)} to stop"
    )
    return f"Plan: {', '.join(parts)}; {nodes}."


def _group_lines(group: GroupDiff) -> list[str]:
    old, new = group.count
    if group.op == "~":
        count = f"  count {old} {ARROW} {new}" if old != new else ""
    else:
        count = f"  count {new or old}"
    lines = [f"{group.op} group {group.group}{count}"]
    for change in group.changes:
        mark = "  (restarts its replicas)" if change.needs_restart else ""
        lines.append(INDENT + _setting_line(change) + mark)
    for op in "+-":
        ids = [n.node for n in group.nodes if n.op == op]
        if ids:
            lines.append(f"{INDENT}{op} {node_names(ids)}")
    same: dict[str, list[str]] = {}
    for node in group.nodes:
        for change in node.changes if node.op == "~" else ():
            same.setdefault(_node_change_text(change), []).append(node.node)
    lines += [f"{INDENT}~ {node_names(ids)}  {text}" for text, ids in same.items()]
    return lines


def _setting_line(change: Change, *, quoted: bool = False) -> str:
    """``~ restart.policy: never → on-failure``, ``+ resources.env.X: 1``, ``- ...``."""
    old, new = _show(change.old, quoted), _show(change.new, quoted)
    if change.op == "+":
        return f"+ {change.path}: {new}"
    if change.op == "-":
        return f"- {change.path}: {old}"
    return f"~ {change.path}: {old} {ARROW} {new}"


def _node_change_text(change: Change, quoted: bool | None = None) -> str:
    """``num_actors: 2 → 8``, ``variable_source: @learner → @learner/1  (round_robin)``;
    an argument that appears or goes shows ``(absent)`` on that side; strings quoted in
    arguments (``quoted`` None: when the path is an argument's)."""
    quoted = _is_argument(change.path) if quoted is None else quoted
    if change.via == "group" and isinstance(change.old, tuple) and isinstance(change.new, tuple):
        return f"{change.path}: {_members(change.old, change.new)}  (members follow, no restart)"
    old = "(absent)" if change.op == "+" else _show(change.old, quoted)
    new = "(absent)" if change.op == "-" else _show(change.new, quoted)
    via = f"  ({change.via})" if change.via else ""
    return f"{change.path}: {old} {ARROW} {new}{via}"


def _members(old: tuple[Value, ...], new: tuple[Value, ...]) -> str:
    """``@actor ×2 → ×8 (+actor/2..7)``: a whole-group handle whose members change."""
    group = getattr(new, "group", "") or getattr(old, "group", "")
    before = [str(getattr(r, "node", r)) for r in old]
    after = [str(getattr(r, "node", r)) for r in new]
    gained = [n for n in after if n not in set(before)]
    lost = [n for n in before if n not in set(after)]
    moves = [f"+{node_names(gained)}"] * bool(gained) + [f"-{node_names(lost)}"] * bool(lost)
    return f"@{group} ×{len(before)} {ARROW} ×{len(after)} ({', '.join(moves)})"


def _is_argument(path: str) -> bool:
    head = re.split(r"[.\[]", path, maxsplit=1)[0]
    return head not in {"kind", "target", "factory", "disable_run", "rpc", "executable", "seed"}


def _show(value: Value, quoted: bool = False) -> str:
    """A value as the plan shows it: strings bare in settings, quoted in arguments."""
    if isinstance(value, str) and not quoted:
        return value
    if isinstance(value, tuple) and not quoted and all(isinstance(v, str) for v in value):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return format_value(value)


def _worth_showing(exe: ExecutableDiff) -> bool:
    """Whether an executable line says more than its node's line: one added or removed
    executable holding only the node of its name is not shown."""
    if exe.op == "~":
        return True
    nodes = next((c.new if exe.op == "+" else c.old for c in exe.changes if c.path == "nodes"), ())
    return nodes != (exe.executable,)


def _executable_line(exe: ExecutableDiff) -> str:
    if exe.op == "~":
        changes = "; ".join(_node_change_text(c, quoted=False) for c in exe.changes)
        return f"~ {exe.executable}  {changes}"
    side = {c.path: (c.new if exe.op == "+" else c.old) for c in exe.changes}
    where = f", host set {side['placement']}" if side.get("placement") else ""
    return f"{exe.op} {exe.executable}  [{side.get('mode')}{where}]  {_show(side.get('nodes'))}"


def node_names(ids: list[str]) -> str:
    """``actor/2..7`` for runs of three or more consecutive replicas, others by name."""
    out: list[str] = []
    run: list[tuple[str, int]] = []

    def flush() -> None:
        if len(run) >= 3:
            out.append(f"{run[0][0]}/{run[0][1]}..{run[-1][1]}")
        else:
            out.extend(f"{g}/{r}" for g, r in run)
        run.clear()

    for node_id in ids:
        m = _REPLICA.match(node_id)
        if m is None:
            flush()
            out.append(node_id)
            continue
        group, replica = m.group(1), int(m.group(2))
        if run and (run[-1][0] != group or run[-1][1] + 1 != replica):
            flush()
        run.append((group, replica))
    flush()
    return ", ".join(out)


# -- JSON -------------------------------------------------------------------------------


def change_to_dict(change: Change) -> dict[str, Any]:
    """One change as JSON-ready data."""
    return {
        "path": change.path,
        "op": change.op,
        "old": to_json(change.old),
        "new": to_json(change.new),
        "needs_restart": change.needs_restart,
        "via": change.via,
    }


def diff_to_dict(diff: ProgramDiff) -> dict[str, Any]:
    """The whole diff as JSON-ready data, in the diff's (deterministic) order."""
    return {
        "equal": diff.equal,
        "program": [change_to_dict(c) for c in diff.program],
        "groups": [
            {
                "group": g.group,
                "op": g.op,
                "count": list(g.count),
                "changes": [change_to_dict(c) for c in g.changes],
                "nodes": [
                    {
                        "node": n.node,
                        "op": n.op,
                        "effect": n.effect,
                        "changes": [change_to_dict(c) for c in n.changes],
                    }
                    for n in g.nodes
                ],
            }
            for g in diff.groups
        ],
        "executables": [
            {
                "executable": e.executable,
                "op": e.op,
                "changes": [change_to_dict(c) for c in e.changes],
            }
            for e in diff.executables
        ],
        "start": list(diff.start),
        "stop": list(diff.stop),
        "restart": list(diff.restart),
    }
