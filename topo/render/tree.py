"""A rich terminal tree from a :class:`~topo.render.model.View`: boxes nest as in the
picture (host placement ⊃ thread set ⊃ group ⊃ packed process ⊃ node), and under
every node the handles it holds (``→ learner  variable_source · round-robin``)."""

from __future__ import annotations

from rich.text import Text
from rich.tree import Tree

from topo.render.model import Box, View, ViewEdge, ViewNode
from topo.render.style import BOX, EDGE, look

VIA_STYLE: dict[str, str] = {"ref": "", **{via: c.term for via, c in EDGE.items()}}
BOX_STYLE: dict[str, str] = {kind: c.term for kind, c in BOX.items()}


def _node_text(n: ViewNode) -> Text:
    if n.disabled:
        return Text(n.label, style="dim strike")
    term = look(n.role).term
    t = Text(n.label, style="bold " + term)
    t.append(f"  [{n.role}]", style=term)
    if n.detail:
        t.append(f"  {n.detail}", style="dim")
    if n.neighbour:
        t.append("  (neighbour)", style="dim")
    return t


def _edge_text(e: ViewEdge, view: View) -> Text:
    t = Text("→ ", style="dim")
    t.append(view.nodes[e.dst].label, style="bold")
    t.append(f"  {e.label}", style=VIA_STYLE.get(e.via, "") or "dim")
    return t


def _fill(tree: Tree, box: Box, view: View, out_edges: dict[str, list[ViewEdge]]) -> None:
    for key in box.nodes:
        branch = tree.add(_node_text(view.nodes[key]))
        for e in out_edges.get(key, []):
            branch.add(_edge_text(e, view))
    for child in box.boxes:
        style = "dim" if child.disabled else BOX_STYLE.get(child.kind, "")
        sub = tree.add(Text(child.label, style=style))
        _fill(sub, child, view, out_edges)


def summary(view: View) -> str:
    """One line: drawn nodes and edges against the IR's."""
    drawn = sum(1 for n in view.nodes.values() if not n.disabled)
    folded = sum(1 for n in view.nodes.values() if n.collapsed)
    parts = [f"{view.ir_nodes} nodes", f"{view.ir_edges} handles"]
    if folded:
        groups = "group" if folded == 1 else "groups"
        parts.append(f"drawn as {drawn} boxes ({folded} {groups} collapsed; --expand for all)")
    if view.options.focus:
        parts.append(f"group {view.options.focus} and its neighbours")
    return " · ".join(parts)


def to_tree(view: View) -> Tree:
    """The view as a :class:`rich.tree.Tree` rooted at the program name."""
    out_edges: dict[str, list[ViewEdge]] = {}
    for e in view.edges:
        out_edges.setdefault(e.src, []).append(e)
    title = Text(view.name, style="bold underline")
    title.append(f"  {summary(view)}", style="dim")
    tree = Tree(title, guide_style="dim")
    _fill(tree, view.root, view, out_edges)
    return tree
