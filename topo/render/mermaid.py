"""A Mermaid flowchart from a :class:`~topo.render.model.View` (renders in GitHub Markdown).

Same picture as the DOT one, in Mermaid's vocabulary: subgraphs for groups, thread
sets, packed processes and host placements; node shapes and colours by role, as the
node's kind declares it (reverb a cylinder, cacher a subroutine box, counter a hexagon,
steps limiter a flag, courier a rounded box, py a plain box), one ``classDef`` per role
drawn; round-robin and fallback edges dotted, primary edges thick.
Ids are derived from node ids, so the text is stable and diffs read well.
"""

from __future__ import annotations

import json
import re

from topo.render.model import Box, View, ViewNode
from topo.render.style import BOX, DISABLED, DISABLED_TEXT, EDGE, look

ARROWS: dict[str, str] = {
    "ref": "-->",
    "round_robin": "-.->",
    "fallback": "-.->",
    "source": "-->",
    "primary": "==>",
}
EDGE_COLOUR: dict[str, str] = {
    "round_robin": f"stroke:{EDGE['round_robin'].stroke},color:{EDGE['round_robin'].stroke}",
    "fallback": f"stroke:{EDGE['fallback'].stroke},stroke-dasharray:2 4",
    "source": f"stroke:{EDGE['source'].stroke}",
    "primary": f"stroke:{EDGE['primary'].stroke}",
}
CLASSES: dict[str, str] = {
    "many": "stroke-width:3px",
    "disabled": f"fill:{DISABLED.fill},stroke:{DISABLED.stroke},color:{DISABLED_TEXT},"
    "stroke-dasharray:4 3",
}
_THICK = "fill:{c.fill},stroke:{c.stroke},stroke-width:2px"
BOX_STYLE: dict[str, str] = {
    "group": f"fill:none,stroke:{BOX['group'].stroke}",
    "threads": _THICK.format(c=BOX["threads"]),
    "process": _THICK.format(c=BOX["process"]),
    "host": f"fill:none,stroke:{BOX['host'].stroke},stroke-width:2px,stroke-dasharray:6 4",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def text(label: str) -> str:
    """A Mermaid quoted label: quotes and angle brackets as entities, newlines as <br/>."""
    body = (
        label.replace("#", "#35;")
        .replace('"', "#quot;")
        .replace("<", "#lt;")
        .replace(">", "#gt;")
        .replace("\n", "<br/>")
    )
    return f'"{body}"'


class _Ids:
    """Stable, unique Mermaid identifiers derived from keys."""

    def __init__(self) -> None:
        self.by_key: dict[str, str] = {}
        self.used: set[str] = set()

    def get(self, key: str, prefix: str) -> str:
        found = self.by_key.get(key)
        if found is not None:
            return found
        base = prefix + _UNSAFE.sub("_", key)
        made, i = base, 2
        while made in self.used:
            made, i = f"{base}_{i}", i + 1
        self.used.add(made)
        self.by_key[key] = made
        return made


_KEYWORDS = {"end", "graph", "flowchart", "subgraph", "style", "class", "classDef", "default"}


def _role_class(role: str) -> str:
    """The Mermaid class of a drawing role: its name, made an identifier that is neither a
    keyword nor one of :data:`CLASSES`."""
    name = _UNSAFE.sub("_", role)
    if not name[:1].isalpha():
        name = "role_" + name
    return f"{name}_role" if name in CLASSES or name in _KEYWORDS else name


def _node(n: ViewNode, ident: str) -> str:
    left, right = look(n.role).mermaid
    label = n.label if not n.detail else f"{n.label}\n{n.detail}"
    return f"{ident}{left}{text(label)}{right}"


def _box(
    view: View, box: Box, ids: tuple[_Ids, _Ids], depth: int, out: list[str], styles: list[str]
) -> None:
    pad = "  " * depth
    inner = pad
    if box.kind != "root":
        cid = ids[1].get(box.key, "c_")
        out.append(f"{pad}subgraph {cid}[{text(box.label)}]")
        style = BOX_STYLE[box.kind] if not box.disabled else CLASSES["disabled"]
        styles.append(f"  style {cid} {style}")
        inner = pad + "  "
    for key in box.nodes:
        out.append(inner + _node(view.nodes[key], ids[0].get(key, "n_")))
    for child in box.boxes:
        _box(view, child, ids, depth + (box.kind != "root"), out, styles)
    if box.kind != "root":
        out.append(f"{pad}end")


def to_mermaid(view: View) -> str:
    """The view as a ``flowchart LR`` Mermaid diagram."""
    ids = _Ids()
    out = ["---", f"title: {json.dumps(view.name)}", "---", "flowchart LR"]
    styles: list[str] = []
    _box(view, view.root, (ids, _Ids()), 1, out, styles)
    links: list[str] = []
    for i, e in enumerate(view.edges):
        arrow = ARROWS.get(e.via, "-->")
        out.append(f"  {ids.get(e.src, 'n_')} {arrow}|{text(e.label)}| {ids.get(e.dst, 'n_')}")
        if e.via in EDGE_COLOUR:
            links.append(f"  linkStyle {i} {EDGE_COLOUR[e.via]}")
    roles = {n.role: look(n.role) for n in view.nodes.values() if not n.disabled}
    classes = {_role_class(r): f"fill:{c.fill},stroke:{c.stroke}" for r, c in roles.items()}
    classes.update(CLASSES)
    out.extend(f"  classDef {name} {css}" for name, css in classes.items())
    members: dict[str, list[str]] = {name: [] for name in classes}
    for key, n in view.nodes.items():
        ident = ids.get(key, "n_")
        members["disabled" if n.disabled else _role_class(n.role)].append(ident)
        if n.collapsed:
            members["many"].append(ident)
    out.extend(f"  class {','.join(m)} {name}" for name, m in members.items() if m)
    out.extend(styles)
    out.extend(links)
    return "\n".join(out) + "\n"
