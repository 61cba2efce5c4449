"""The view graph: what a picture of a Program shows, built once from the IR.

Every renderer (DOT, Mermaid, the terminal tree) reads a :class:`View`, never the
Program, so the three pictures always agree. Building the view decides:

* which nodes are drawn (disabled/empty groups only with ``show_disabled``; with
  ``focus`` one group and the nodes it touches);
* which groups are collapsed into one box ``actor x64`` (groups with more replicas
  than ``collapse_above``, unless ``expand``), and how their edges aggregate: IR edges
  whose ends fall in the same pair of boxes, with the same argument (indices folded to
  ``[*]``) and the same wiring, become one edge carrying their count;
* the nesting of boxes: host placement ⊃ thread set (a process holding nodes of several
  groups) ⊃ group ⊃ process of packed replicas ⊃ node.

Everything is ordered by the IR's own order, so the same Program always gives the
same view (and byte-identical DOT).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from topo.ir.program import Executable, Group, Program
from topo.kinds import role_of as kind_role

TIMES = "\u00d7"  # multiplication sign, as in "actor x64"

Role = str  # a drawing role, as the node's kind declares it (topo.kinds)
BoxKind = Literal["root", "host", "threads", "group", "process"]

DEFAULT_COLLAPSE_ABOVE = 8

VIA_LABEL = {
    "ref": "",
    "round_robin": "round-robin",
    "fallback": "fallback",
    "source": "source",
    "primary": "primary",
}

_INDEX = re.compile(r"\[\d+\]")


class UnknownGroupError(ValueError):
    """``focus`` names no group of the program."""

    def __init__(self, name: str, groups: list[str]) -> None:
        self.name = name
        self.groups = groups
        super().__init__(f"no group named {name!r}; groups are: {', '.join(groups)}")


@dataclass(frozen=True, slots=True)
class ViewOptions:
    """How to draw: collapse threshold, expansion (of every group, or of the groups named
    in ``expanded``), focus group, disabled nodes."""

    expand: bool = False
    collapse_above: int = DEFAULT_COLLAPSE_ABOVE
    focus: str | None = None
    show_disabled: bool = False
    expanded: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ViewNode:
    """One drawn box: a single IR node, or a collapsed group standing for ``count`` nodes."""

    key: str
    label: str
    group: str
    role: Role
    count: int
    collapsed: bool = False
    disabled: bool = False
    neighbour: bool = False
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ViewEdge:
    """``src`` holds handle(s) to ``dst`` in argument ``arg``; ``count`` IR edges folded."""

    src: str
    dst: str
    arg: str
    via: str
    count: int = 1
    targets: int = 1

    @property
    def label(self) -> str:
        """``variable_source x32 · round-robin``: argument, fold count, wiring, and
        ``over 16`` when the handles spread over several replicas of a collapsed box."""
        text = self.arg
        if self.count > 1:
            text += f" {TIMES}{self.count}"
        via = VIA_LABEL.get(self.via, self.via)
        if via and via != self.arg:
            text += f" · {via}"
        if self.targets > 1:
            text += f" over {self.targets}"
        return text


@dataclass(slots=True)
class Box:
    """A cluster: a host placement, a thread set, a group, or a process of packed replicas."""

    key: str
    kind: BoxKind
    name: str
    label: str = ""
    disabled: bool = False
    boxes: list[Box] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)

    def walk(self) -> list[Box]:
        """This box and every box inside it, depth first, in drawing order."""
        out = [self]
        for b in self.boxes:
            out.extend(b.walk())
        return out


@dataclass(slots=True)
class View:
    """The whole picture: nested boxes, drawn nodes by key, aggregated edges."""

    name: str
    root: Box
    nodes: dict[str, ViewNode]
    edges: list[ViewEdge]
    ir_nodes: int
    ir_edges: int
    options: ViewOptions
    members: dict[str, list[str]] = field(default_factory=dict)  # drawn key -> IR node ids


def role_of(group: Group) -> Role:
    """The drawing role of a group's nodes, as its kind declares it for the group's target
    (a courier serving the built-in counter draws as ``counter``); for a kind not
    registered here, the role the IR recorded."""
    return kind_role(group.kind, group.target, group.draw)


def short_target(target: str) -> str:
    """``examples.agents.dqn:Learner`` → ``dqn:Learner``."""
    module, _, attr = target.partition(":")
    return f"{module.rsplit('.', 1)[-1]}:{attr}" if attr else module.rsplit(".", 1)[-1]


def _group_label(g: Group, shown: int) -> str:
    if not g.enabled:
        return f"{g.name} · {g.kind} · disabled"
    count = f"{TIMES}{g.count}" if shown in (0, g.count) else f"{TIMES}{shown} of {g.count}"
    return f"{g.name} · {g.kind} {count}"


def _packing(g: Group) -> str:
    if g.per_process and g.per_process > 1 and g.count > 1:
        procs = -(-g.count // g.per_process)
        return f"{procs} procs {TIMES} {g.per_process} threads"
    return ""


@dataclass(slots=True)
class _Fold:
    """IR edges folding into one view edge: their argument, count and distinct targets."""

    arg: str
    targets: set[str]
    count: int = 1


class _Builder:
    def __init__(self, program: Program, options: ViewOptions) -> None:
        self.p = program
        self.o = options
        self.root = Box("root", "root", program.name)
        self.boxes: dict[tuple[tuple[str, str], ...], Box] = {(): self.root}
        self.nodes: dict[str, ViewNode] = {}
        self.node_of: dict[str, str] = {}  # IR node id -> view key
        self.box_count: dict[str, int] = {}  # group box key -> IR nodes in it

    def collapsed(self, g: Group) -> bool:
        if self.o.expand or g.name in self.o.expanded:
            return False
        return g.count > max(self.o.collapse_above, 1)

    def box(self, path: tuple[tuple[str, str], ...]) -> Box:
        found = self.boxes.get(path)
        if found is not None:
            return found
        parent = self.box(path[:-1])
        kind, name = path[-1]
        key = "/".join(f"{k}:{n}" for k, n in path)
        made = Box(key, kind, name)  # type: ignore[arg-type]
        parent.boxes.append(made)
        self.boxes[path] = made
        return made

    def path(self, g: Group, ex: Executable | None) -> tuple[tuple[str, str], ...]:
        path: list[tuple[str, str]] = []
        if ex is not None and ex.placement:
            path.append(("host", ex.placement))
        if ex is not None and ex.mode == "set":
            path.append(("threads", ex.id))
        path.append(("group", g.name))
        return tuple(path)

    def visible(self) -> set[str] | None:
        """IR node ids to draw when focusing on a group (None: all)."""
        if self.o.focus is None:
            return None
        if self.o.focus not in self.p.group_index:
            raise UnknownGroupError(self.o.focus, [g.name for g in self.p.groups])
        inside = {n.id for n in self.p.nodes if n.group == self.o.focus}
        seen = set(inside)
        for e in self.p.edges:
            if e.src in inside:
                seen.add(e.dst)
            if e.dst in inside:
                seen.add(e.src)
        return seen

    def add_nodes(self, visible: set[str] | None) -> None:
        groups = self.p.group_index
        execs = self.p.executable_index
        for n in self.p.nodes:
            if visible is not None and n.id not in visible:
                continue
            g = groups[n.group]
            ex = execs.get(n.executable)
            gpath = self.path(g, ex)
            gbox = self.box(gpath)
            self.box_count[gbox.key] = self.box_count.get(gbox.key, 0) + 1
            neighbour = self.o.focus is not None and n.group != self.o.focus
            if self.collapsed(g):
                key = f"{gbox.key}/*"
                old = self.nodes.get(key)
                if old is None:
                    gbox.nodes.append(key)
                count = 1 if old is None else old.count + 1
                self.nodes[key] = ViewNode(
                    key,
                    f"{g.name} {TIMES}{count}",
                    g.name,
                    role_of(g),
                    count,
                    collapsed=True,
                    neighbour=neighbour,
                    detail=_packing(g),
                )
                self.node_of[n.id] = key
                continue
            parent = gbox
            if ex is not None and ex.mode == "replicas" and len(ex.nodes) > 1:
                parent = self.box((*gpath, ("process", ex.id)))
            parent.nodes.append(n.id)
            self.nodes[n.id] = ViewNode(
                n.id,
                n.id,
                g.name,
                role_of(g),
                1,
                neighbour=neighbour,
                detail=short_target(g.target) if g.singleton else "",
            )
            self.node_of[n.id] = n.id

    def add_absent_groups(self) -> None:
        """Disabled and empty groups, greyed, when asked for."""
        if not self.o.show_disabled or self.o.focus is not None:
            return
        present = {n.group for n in self.p.nodes}
        for g in self.p.groups:
            if g.name in present:
                continue
            gbox = self.box((("group", g.name),))
            gbox.disabled = True
            key = f"{gbox.key}/-"
            state = "disabled" if not g.enabled else "no replicas"
            self.nodes[key] = ViewNode(
                key,
                f"{g.name} ({state})",
                g.name,
                role_of(g),
                0,
                disabled=True,
                detail=short_target(g.target),
            )
            gbox.nodes.append(key)
            self.box_count[gbox.key] = 0

    def label_boxes(self) -> None:
        groups = self.p.group_index
        execs = self.p.executable_index
        for b in self.root.walk():
            if b.kind == "group":
                g = groups[b.name]
                b.label = _group_label(g, self.box_count.get(b.key, 0))
                if not g.enabled:
                    b.disabled = True
            elif b.kind == "host":
                b.label = f"host placement: {b.name}"
            elif b.kind in ("threads", "process"):
                n = len(execs[b.name].nodes)
                b.label = f"process {b.name} · {n} thread{'' if n == 1 else 's'}"

    def edges(self, visible: set[str] | None) -> list[ViewEdge]:
        folded: dict[tuple[str, str, str, str], _Fold] = {}
        focus = self.o.focus
        for e in self.p.edges:
            src = self.node_of.get(e.src)
            dst = self.node_of.get(e.dst)
            if src is None or dst is None:
                continue
            if focus is not None and self.nodes[src].neighbour and self.nodes[dst].neighbour:
                continue  # only edges touching the focused group
            fold = self.nodes[src].collapsed or self.nodes[dst].collapsed
            arg = _INDEX.sub("[*]", e.arg) if fold else e.arg
            k = (src, dst, arg, e.via)
            entry = folded.get(k)
            if entry is None:
                folded[k] = _Fold(e.arg, {e.dst})
            else:
                entry.count += 1
                entry.targets.add(e.dst)
                if entry.arg != e.arg:
                    entry.arg = arg
        return [
            ViewEdge(src, dst, f.arg, via, f.count, len(f.targets))
            for (src, dst, _arg, via), f in folded.items()
        ]


def build_view(program: Program, options: ViewOptions | None = None) -> View:
    """The picture of ``program`` under ``options`` (see the module docstring)."""
    o = options or ViewOptions()
    b = _Builder(program, o)
    visible = b.visible()
    b.add_nodes(visible)
    b.add_absent_groups()
    b.label_boxes()
    edges = b.edges(visible)
    members: dict[str, list[str]] = {}
    for node, key in b.node_of.items():
        members.setdefault(key, []).append(node)
    n_nodes, n_edges = len(program.nodes), len(program.edges)
    return View(program.name, b.root, b.nodes, edges, n_nodes, n_edges, o, members)
