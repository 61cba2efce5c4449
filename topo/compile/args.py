"""Argument templates: compiled once per group, rendered once per node.

Constant parts (literals and references) are resolved once; ``${...}`` with
per-replica names and round-robin choices are evaluated for each node. Rendering
returns the node's frozen argument tree and the edges it creates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from topo.compile.refs import GroupTable, RefError, is_reference, unescape
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import FrozenMap, Opaque, Ref, Value, freeze
from topo.syntax import interpolate
from topo.syntax.expr import ExprError
from topo.syntax.source import PathKey, SourceMap
from topo.targets import TARGET_PATTERN
from topo.vocab import EdgeVia

EdgeSpec = tuple[str, str, EdgeVia]  # (arg path, destination node, via)


@dataclass(frozen=True)
class NodeContext:
    """Per-node names available to ``${...}`` in args, and its process index in the group."""

    scope: Mapping[str, Any]
    replica: int
    process_index: int


def arg_path(path: tuple[str | int, ...]) -> str:
    """``("sources", 1)`` -> ``"sources[1]"``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class Template:
    """A compiled argument value."""

    def render(self, ctx: NodeContext, edges: list[EdgeSpec]) -> Value:
        raise NotImplementedError


@dataclass
class Const(Template):
    value: Value
    edges: list[EdgeSpec]

    def render(self, ctx: NodeContext, edges: list[EdgeSpec]) -> Value:
        edges.extend(self.edges)
        return self.value


@dataclass
class Seq(Template):
    items: list[Template]

    def render(self, ctx: NodeContext, edges: list[EdgeSpec]) -> Value:
        return tuple(t.render(ctx, edges) for t in self.items)


@dataclass
class Map(Template):
    items: dict[str, Template]

    def render(self, ctx: NodeContext, edges: list[EdgeSpec]) -> Value:
        return FrozenMap({k: t.render(ctx, edges) for k, t in self.items.items()})


@dataclass
class Dynamic(Template):
    """A string with ``${...}``: evaluated per node, then read as a reference if it is one."""

    text: str
    path: tuple[str | int, ...]
    compiler: ArgCompiler

    def render(self, ctx: NodeContext, edges: list[EdgeSpec]) -> Value:
        try:
            value = interpolate.render(self.text, ctx.scope)
        except ExprError as exc:
            raise self.compiler.error(str(exc), self.path) from None
        if isinstance(value, str) and is_reference(value):
            return self.compiler.reference(value, self.path, edges)
        if isinstance(value, str):
            return unescape(value)
        return freeze(value)


@dataclass
class RoundRobin(Template):
    """``{round_robin: [pools], fallback: [...], per: replica|process}``."""

    pool: tuple[str, ...]
    via: EdgeVia
    per: str
    path: tuple[str | int, ...]

    def render(self, ctx: NodeContext, edges: list[EdgeSpec]) -> Value:
        index = ctx.replica if self.per == "replica" else ctx.process_index
        node = self.pool[index % len(self.pool)]
        edges.append((arg_path(self.path), node, self.via))
        return Ref(node)


@dataclass
class ArgCompiler:
    """Compiles the args of one group; errors point at the YAML that caused them."""

    table: GroupTable
    sources: SourceMap
    base: PathKey  # ("nodes", group, "args") or ("nodes", group, "overrides", "3")
    errors: list[Diagnostic] = field(default_factory=list)

    def error(
        self, message: str, path: tuple[str | int, ...], hint: str | None = None
    ) -> TopoError:
        return TopoError([Diagnostic(message, self.sources.pos((*self.base, *path)), hint)])

    def reference(self, text: str, path: tuple[str | int, ...], edges: list[EdgeSpec]) -> Value:
        try:
            resolved = self.table.resolve(text)
        except RefError as exc:
            raise self.error(str(exc), path, exc.hint) from None
        if isinstance(resolved, Ref):
            edges.append((arg_path(path), resolved.node, "ref"))
        elif resolved is not None:
            for i, ref in enumerate(resolved):
                edges.append((arg_path((*path, i)), ref.node, "ref"))
        return resolved

    def compile(self, value: Any, path: tuple[str | int, ...] = ()) -> Template:
        """A template for ``value``; collects errors rather than stopping at the first."""
        try:
            return self._compile(value, path)
        except TopoError as exc:
            self.errors.extend(exc.diagnostics)
            return Const(None, [])

    def _compile(self, value: Any, path: tuple[str | int, ...]) -> Template:
        if isinstance(value, str):
            if interpolate.has_interpolation(value):
                return Dynamic(value, path, self)
            if is_reference(value):
                edges: list[EdgeSpec] = []
                return Const(self.reference(value, path, edges), edges)
            return Const(unescape(value), [])
        if isinstance(value, list):
            items = [self.compile(v, (*path, i)) for i, v in enumerate(value)]
            return _fold(Seq(items))
        if isinstance(value, dict):
            if "round_robin" in value:
                return self._round_robin(value, path)
            if set(value) == {"import"}:
                return self._import(value["import"], (*path, "import"))
            items_d = {str(k): self.compile(v, (*path, k)) for k, v in value.items()}
            return _fold(Map(items_d))
        return Const(value, [])

    def _import(self, target: Any, path: tuple[str | int, ...]) -> Template:
        """``{import: "module:attr"}``: the Python object itself, imported in the node."""
        if not isinstance(target, str) or not re.match(TARGET_PATTERN, target):
            raise self.error(
                f"import takes 'package.module:attribute', got {target!r}",
                path,
                "e.g. {import: 'topo.launchpad:stop_program'}; a string without import: is "
                "passed as a string",
            )
        module, _, attr = target.partition(":")
        return Const(Opaque(f"<{attr} from {module}>", import_path=target), [])

    def _pool(self, entries: Any, path: tuple[str | int, ...]) -> tuple[str, ...]:
        single = isinstance(entries, str)
        if single:
            entries = [entries]
        if not isinstance(entries, list):
            raise self.error("a round-robin pool is a list of references like '@learner'", path)
        nodes: list[str] = []
        for i, entry in enumerate(entries):
            where = path if single else (*path, i)
            if not isinstance(entry, str) or not is_reference(entry):
                raise self.error(
                    f"round-robin pool entries must be references like '@learner', got {entry!r}",
                    where,
                )
            try:
                nodes.extend(self.table.resolve_nodes(entry))
            except RefError as exc:
                raise self.error(str(exc), where, exc.hint) from None
        return tuple(nodes)

    def _round_robin(self, spec: dict[str, Any], path: tuple[str | int, ...]) -> Template:
        unknown = set(spec) - {"round_robin", "fallback", "per"}
        if unknown:
            key = sorted(unknown)[0]
            raise self.error(
                f"unknown key '{key}' in round_robin",
                (*path, key),
                "round_robin takes: round_robin (the pools), fallback, per",
            )
        per = spec.get("per", "replica")
        if per not in ("replica", "process"):
            raise self.error(
                f"round_robin per must be 'replica' or 'process', got {per!r}", (*path, "per")
            )
        pool = self._pool(spec["round_robin"], (*path, "round_robin"))
        via: EdgeVia = "round_robin"
        # The fallback is checked even while unused: another -p value may need it.
        fallback = self._pool(spec["fallback"], (*path, "fallback")) if "fallback" in spec else ()
        if not pool and fallback:
            pool = fallback
            via = "fallback"
        if not pool and self.table.lenient:
            return Const(None, [])
        if not pool:
            raise self.error(
                "round_robin has nothing to choose from: every pool is empty or disabled"
                + (" and so is the fallback" if "fallback" in spec else ""),
                (*path, "round_robin"),
                "add a fallback, e.g. fallback: ['@trainer'] (Mava's: no caches -> the trainer)",
            )
        return RoundRobin(pool, via, per, path)


def _fold(t: Seq | Map) -> Template:
    """Collapse a container of constants into one constant."""
    parts = t.items if isinstance(t, Seq) else list(t.items.values())
    if not all(isinstance(p, Const) for p in parts):
        return t
    edges: list[EdgeSpec] = []
    value = t.render(NodeContext({}, 0, 0), edges)
    return Const(value, edges)
