"""Graphviz DOT text from a :class:`~topo.render.model.View`.

Groups are clusters; a process holding several nodes as threads is a filled, rounded
box; a host placement is a dashed, unfilled box around processes. Node shapes and fills
follow the role, as the node's kind declares it (reverb a cylinder, cacher a folded tab,
counter a hexagon, steps limiter an octagon, courier a rounded box, py a plain box); a
collapsed group has a double border.
Round-robin edges are dashed blue, fallback edges dotted, primary edges bold.
The output depends only on the view, so it is byte-identical across runs.
"""

from __future__ import annotations

from topo.render.model import Box, View, ViewEdge, ViewNode
from topo.render.style import BOX, DISABLED, DISABLED_TEXT, EDGE, look

_LINE = {"round_robin": "style=dashed, ", "fallback": "style=dotted, ", "primary": "style=bold, "}


def _edge_style(via: str) -> str:
    c = EDGE[via].stroke
    return f'{_LINE.get(via, "")}color="{c}", fontcolor="{c}"'


EDGE_STYLE: dict[str, str] = {"ref": "", **{via: _edge_style(via) for via in EDGE}}
_PROCESS = 'style="rounded,filled,bold"; fillcolor="{c.fill}"; color="{c.stroke}";'
BOX_STYLE: dict[str, str] = {
    "group": f'style="rounded"; color="{BOX["group"].stroke}";',
    "threads": _PROCESS.format(c=BOX["threads"]),
    "process": _PROCESS.format(c=BOX["process"]),
    "host": f'style="dashed"; color="{BOX["host"].stroke}"; penwidth=2;',
}
GREY = f'color="{DISABLED.stroke}", fontcolor="{DISABLED_TEXT}"'
GREY_BOX = f'color="{DISABLED.stroke}"; fontcolor="{DISABLED_TEXT}"; style="dashed";'


def quote(text: str) -> str:
    """A DOT double-quoted string (backslashes, quotes and newlines escaped)."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{body}"'


def _node_line(n: ViewNode, indent: str) -> str:
    role = look(n.role)
    shape, style = role.shape, role.style
    label = n.label if not n.detail else f"{n.label}\n{n.detail}"
    attrs = [f"label={quote(label)}", f"shape={shape}", f'style="{style}"']
    if n.disabled:
        attrs += [f'fillcolor="{DISABLED.fill}"', GREY, 'style="dashed,filled"']
        attrs.remove(f'style="{style}"')
    else:
        attrs.append(f'fillcolor="{role.fill}"')
    if n.collapsed:
        attrs.append("peripheries=2")
    if n.neighbour:
        attrs.append(f'color="{DISABLED_TEXT}"')
    return f"{indent}{quote(n.key)} [{', '.join(attrs)}];"


def _box_lines(view: View, box: Box, ids: dict[str, int], depth: int) -> list[str]:
    indent = "  " * depth
    lines: list[str] = []
    if box.kind != "root":
        lines.append(f"{indent}subgraph cluster_{ids[box.key]} {{")
        inner = indent + "  "
        lines.append(f"{inner}label={quote(box.label)};")
        lines.append(f"{inner}{BOX_STYLE[box.kind]}")
        if box.disabled:
            lines.append(f"{inner}{GREY_BOX}")
    else:
        inner = indent
    for key in box.nodes:
        lines.append(_node_line(view.nodes[key], inner))
    for child in box.boxes:
        lines.extend(_box_lines(view, child, ids, depth + (box.kind != "root")))
    if box.kind == "group":
        # replicas of one group line up in one column, whatever their wiring
        members = box.nodes + [k for b in box.boxes if b.kind == "process" for k in b.nodes]
        if len(members) > 1:
            lines.append(f"{inner}{{ rank=same; {' '.join(quote(k) for k in members)} }}")
    if box.kind != "root":
        lines.append(f"{indent}}}")
    return lines


def _edge_line(e: ViewEdge) -> str:
    attrs = [f"label={quote(e.label)}"]
    if EDGE_STYLE.get(e.via):
        attrs.append(EDGE_STYLE[e.via])
    if e.count > 1:
        attrs.append("penwidth=2")
    return f"  {quote(e.src)} -> {quote(e.dst)} [{', '.join(attrs)}];"


def to_dot(view: View) -> str:
    """The view as a DOT digraph (left to right, compound clusters)."""
    ids = {b.key: i for i, b in enumerate(view.root.walk())}
    lines = [
        f"digraph {quote(view.name)} {{",
        "  rankdir=LR;",
        "  compound=true;",
        "  newrank=true;",
        f'  label={quote(view.name)}; labelloc=t; fontname="Helvetica";',
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    lines.extend(_box_lines(view, view.root, ids, 1))
    lines.extend(_edge_line(e) for e in view.edges)
    lines.append("}")
    return "\n".join(lines) + "\n"
