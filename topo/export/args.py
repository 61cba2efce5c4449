"""Node arguments of the IR -> YAML ``args:`` of a group: one value for all replicas,
``${replica}``, ``{round_robin: [...]}``, or per-replica ``overrides:``.

Values become YAML data: references ``"@g"``/``"@g[i]"``, importable objects
``{import: "module:attr"}``. A pickled object has no YAML form and is a problem --
except a PRNG key, written ``${seed.key}`` (a key per node, derived from the seed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from topo.export.layout import Layout, OutGroup, refs_for
from topo.ir import FrozenMap, Node, Opaque, Program, Ref, Value

SEED_KEY = "${seed.key}"
PLAIN_HINT = (
    "pass plain values (numbers, strings, lists, dicts), handles, or an importable object "
    "(a module-level function, class or constant)"
)


@dataclass(frozen=True)
class Problem:
    """Something of the program YAML cannot say, for the node and argument named."""

    node: str  # IR node id
    arg: str | None
    message: str
    hint: str


class _Refused(Exception):
    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def is_prng_key(obj: Any) -> bool:
    """A JAX/numpy PRNG key: a uint32 array of shape (2,), or a typed JAX key array."""
    module = type(obj).__module__.split(".")[0]
    if module not in ("numpy", "jax", "jaxlib"):
        return False
    dtype, shape = str(getattr(obj, "dtype", "")), tuple(getattr(obj, "shape", (-1,)))
    return (dtype == "uint32" and shape == (2,)) or (dtype.startswith("key<") and shape == ())


def _escape(text: str) -> str:
    """A string as YAML args read it back: ``${`` and a leading ``@`` escaped."""
    text = text.replace("${", "$${")
    return "@" + text if text.startswith("@") else text


def _canon(data: Any) -> str:
    return json.dumps(data, default=repr)


@dataclass
class ArgWriter:
    """Writes the args of exported groups; collects problems and PRNG-key notes."""

    program: Program
    layout: Layout
    problems: list[Problem] = field(default_factory=list)
    seed_keys: list[str] = field(default_factory=list)  # "group.arg" written as ${seed.key}
    edge_via: dict[tuple[str, str], str] = field(default_factory=dict)
    _keys: dict[int, bool] = field(default_factory=dict)

    def data(self, value: Value, top: bool = False) -> Any:
        """YAML data for one value (``_Refused`` when it has none)."""
        if isinstance(value, Ref):
            return self.layout.ref(value.node)
        if isinstance(value, Opaque):
            return self._opaque(value, top)
        if isinstance(value, tuple):
            whole = self._whole_group(value)
            return whole if whole is not None else [self.data(v) for v in value]
        if isinstance(value, FrozenMap):
            if set(value) == {"import"} or "round_robin" in value:
                raise _Refused(
                    f"the dict {dict(value)!r} would be read as "
                    + ("an import" if "import" in value else "round-robin wiring"),
                    "rename the key",
                )
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, str):
            return _escape(value)
        return value

    def _whole_group(self, refs: tuple[Value, ...]) -> str | None:
        if not refs or not all(isinstance(r, Ref) for r in refs):
            return None
        og = self.layout.group_of.get(refs[0].node)  # type: ignore[union-attr]
        if og is None or og.singleton:
            return None
        return f"@{og.name}" if [r.node for r in refs] == [n.id for n in og.nodes] else None  # type: ignore[union-attr]

    def _opaque(self, value: Opaque, top: bool) -> Any:
        if value.import_path is not None:
            return {"import": value.import_path}
        if top and self._is_key(value):
            return SEED_KEY
        raise _Refused(f"is {value.description}, which YAML cannot hold", PLAIN_HINT)

    def _is_key(self, value: Opaque) -> bool:
        hit = self._keys.get(id(value))
        if hit is None:
            try:
                hit = is_prng_key(value.load())
            except Exception:
                hit = False
            self._keys[id(value)] = hit
        return hit

    def group_args(
        self, og: OutGroup, skip: tuple[str, ...] = ()
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """``(args, overrides)`` of a group; ``skip`` names the kind's own fields, written
        as group fields (with any per-replica differences as overrides)."""
        args: dict[str, Any] = {}
        overrides: dict[str, dict[str, Any]] = {}
        nodes = og.nodes
        names = list(nodes[0].args)
        if any(list(n.args) != names for n in nodes[1:]):
            odd = next(n for n in nodes if list(n.args) != names)
            self.problems.append(
                Problem(
                    odd.id,
                    None,
                    f"passes the arguments ({', '.join(odd.args)}) while {nodes[0].id} passes "
                    f"({', '.join(names)}); a YAML group passes the same ones to every replica",
                    "pass every argument to every node of the group (None where unused)",
                )
            )
            return args, overrides
        for name in names:
            values = [n.args[name] for n in nodes]
            simple = name not in skip
            if simple and len(nodes) > 1 and _is_index(values):
                args[name] = "${replica}"
                continue
            if simple and len(nodes) > 1 and all(isinstance(v, Ref) for v in values):
                pool = self._round_robin(values)  # type: ignore[arg-type]
                if pool is not None:
                    args[name] = {"round_robin": pool}
                    for n in nodes:
                        self.edge_via[(self.layout.node_ids[n.id], name)] = "round_robin"
                    continue
            datas = [self._value(n, name, v) for n, v in zip(nodes, values, strict=True)]
            if any(d is _FAILED for d in datas):
                continue
            if SEED_KEY in datas and f"{og.name}.{name}" not in self.seed_keys:
                self.seed_keys.append(f"{og.name}.{name}")
            args[name] = datas[0]
            for i, d in enumerate(datas[1:], start=1):
                if _canon(d) != _canon(datas[0]):
                    overrides.setdefault(str(i), {})[name] = d
        return args, overrides

    def _value(self, node: Node, name: str, value: Value) -> Any:
        try:
            return self.data(value, top=True)
        except _Refused as exc:
            self.problems.append(Problem(node.id, name, str(exc), exc.hint))
            return _FAILED

    def _round_robin(self, refs: list[Ref]) -> list[str] | None:
        """Pool entries such that replica i gets ``pool[i % len(pool)]``: whole groups in
        order of first use when they fit, else the shortest repeating run of nodes."""
        wanted = [r.node for r in refs]
        if len(set(wanted)) < 2:
            return None
        groups: list[OutGroup] = []
        for node in wanted:
            og = self.layout.group_of[node]
            if og not in groups:
                groups.append(og)
        pool = [n.id for og in groups for n in og.nodes]
        if all(w == pool[i % len(pool)] for i, w in enumerate(wanted)):
            return [f"@{og.name}" for og in groups]
        for period in range(2, len(wanted) + 1):
            if all(w == wanted[i % period] for i, w in enumerate(wanted)):
                return refs_for(self.layout, wanted[:period])
        return None  # pragma: no cover - the whole list is always a period


_FAILED = object()


def _is_index(values: list[Value]) -> bool:
    return all(type(v) is int and v == i for i, v in enumerate(values))
