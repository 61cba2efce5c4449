"""Load a topology: YAML text -> extends merged -> params resolved -> interpolated -> Spec."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from topo.diagnostics import Diagnostic, SourcePos, TopoError
from topo.kinds import get_kind, option_owners
from topo.loader.limits import check_node_counts
from topo.loader.models import GroupSpec, TopologySpec, topology_model
from topo.loader.params import (
    RESERVED,
    Param,
    merge_overrides,
    override_name,
    resolve_params,
    suggest,
)
from topo.syntax import interpolate
from topo.syntax.expr import ExprError, names
from topo.syntax.source import Document, PathKey, SourceMap, read_document
from topo.syntax.validation import diagnostics_from

# Fields evaluated per node by the compiler, not here.
_PER_NODE_FIELDS = ("args", "overrides")


@dataclass(frozen=True)
class LoadedSpec:
    """A validated topology file: the Spec plus what later stages need to report errors."""

    file: str
    spec: TopologySpec
    params: dict[str, Param]
    sources: SourceMap
    data: dict[str, Any]
    raw: dict[str, Any] | None = None  # the file with its bases merged, not interpolated
    tree: Any = None  # the file's round-trip tree (comments kept) when it extends nothing
    given: tuple[str, ...] = ()  # the -p values it was loaded with (carried ones merged in)
    dropped: tuple[str, ...] = ()  # carried -p values of parameters the file does not declare

    @property
    def param_values(self) -> dict[str, Any]:
        """Parameter name -> resolved value."""
        return {name: p.value for name, p in self.params.items()}


def _merge(base: Any, child: Any) -> Any:
    if isinstance(base, dict) and isinstance(child, dict):
        out = dict(base)
        for key, value in child.items():
            out[key] = _merge(base[key], value) if key in base else value
        return out
    return child


MAX_BASES_PER_FILE = 16
MAX_BASES_TOTAL = 64


class _Bases:
    """Files read for one load: each file parsed and merged once however often it is
    extended (a diamond), and a bound on how many files one load may read."""

    def __init__(self) -> None:
        self.loaded: dict[Path, Document] = {}
        self.started = 0

    def load(self, path: Path, chain: tuple[Path, ...], where: SourcePos | None) -> Document:
        """The merged document of base file ``path`` (already resolved)."""
        if path in self.loaded:
            return self.loaded[path]
        self.started += 1
        if self.started > MAX_BASES_TOTAL:
            raise TopoError.one(
                f"extends reads more than {MAX_BASES_TOTAL} base files in all",
                where,
                "merge some of the bases into one file",
            )
        try:
            doc = _load_with_extends(path, chain, self)
        except TopoError as exc:
            if any(d.pos for d in exc.diagnostics):
                raise
            # the base itself cannot be read: point at the extends line naming it
            raise TopoError(
                [Diagnostic(f"extends: {d.message}", where, d.hint) for d in exc.diagnostics]
            ) from None
        self.loaded[path] = doc
        return doc


def _base_path(path: Path, base: str, where: SourcePos | None) -> Path:
    """The file a base name refers to (relative to the extending file)."""
    try:
        base_path = (path.parent / base).resolve()
        exists = base_path.exists()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        shown = repr(base) if len(base) <= 60 else repr(base[:57]) + "..."
        raise TopoError.one(
            f"extends: cannot use {shown} as a file name ({reason})", where
        ) from None
    if not exists:
        raise TopoError.one(f"extends: no such file {base} (looked for {base_path})", where)
    return base_path


def _load_with_extends(
    path: Path, chain: tuple[Path, ...] = (), bases_seen: _Bases | None = None
) -> Document:
    bases_seen = bases_seen or _Bases()
    doc = read_document(path, regular_only=bool(chain))
    if not isinstance(doc.data, dict):
        raise TopoError.one(
            "a topology file must be a mapping with at least 'name' and 'nodes'",
            doc.sources.pos(()),
        )
    extends = doc.data.get("extends")
    if extends is None:
        return doc
    bases = [extends] if isinstance(extends, str) else extends
    if not isinstance(bases, list) or not all(isinstance(b, str) for b in bases):
        raise TopoError.one(
            "extends must be a file name or a list of file names", doc.sources.pos(("extends",))
        )
    if len(bases) > MAX_BASES_PER_FILE:
        raise TopoError.one(
            f"extends lists {len(bases)} files; at most {MAX_BASES_PER_FILE} are allowed",
            doc.sources.pos(("extends",)),
        )
    merged: Any = {}
    sources = SourceMap()
    me = path.resolve()
    for i, base in enumerate(bases):
        where = doc.sources.pos(("extends",) if isinstance(extends, str) else ("extends", i))
        base_path = _base_path(path, base, where)
        if base_path in chain or base_path == me:
            raise TopoError.one(f"extends loops back to {base}", where)
        base_doc = bases_seen.load(base_path, (*chain, me), where)
        merged = _merge(merged, base_doc.data)
        sources.update(base_doc.sources)
    data = _merge(merged, {k: v for k, v in doc.data.items() if k != "extends"})
    sources.update(doc.sources)
    return Document(doc.file, data, sources)


def _is_per_node(path: PathKey) -> bool:
    return len(path) >= 3 and path[0] == "nodes" and path[2] in _PER_NODE_FIELDS


def _interpolate(
    data: Any, scope: dict[str, Any], sources: SourceMap, path: PathKey, errors: list[Diagnostic]
) -> Any:
    """Evaluate ``${}`` in every field except params and per-node args (checked, not evaluated)."""
    if isinstance(data, dict):
        return {k: _interpolate(v, scope, sources, (*path, k), errors) for k, v in data.items()}
    if isinstance(data, list):
        return [_interpolate(v, scope, sources, (*path, i), errors) for i, v in enumerate(data)]
    if not isinstance(data, str) or not interpolate.has_interpolation(data):
        return data
    per_node = _is_per_node(path)
    try:
        template = interpolate.parse(data)
        allowed = set(scope) | (RESERVED if per_node else set())
        for source in template.expressions:
            for name in names(source):
                base = name.split(".")[0]
                if name in allowed or base in scope:
                    continue
                if name in RESERVED or base == "seed":
                    raise ExprError(
                        f"'{name}' is only available inside a group's args and overrides"
                        if not per_node
                        else f"unknown name '{name}'"
                    )
                hint = suggest(name, allowed)
                raise ExprError(
                    f"unknown parameter '{name}' in '${{{source}}}'"
                    + (
                        f"; {hint}"
                        if hint
                        else f" (parameters: {', '.join(sorted(scope)) or 'none'})"
                    )
                )
        if per_node:
            return data
        value = interpolate.render(data, scope)
    except ExprError as exc:
        errors.append(Diagnostic(str(exc), sources.pos(path)))
        return data
    if len(path) == 3 and path[0] == "nodes" and path[2] == "enabled" and template.whole:
        # `enabled: ${max_steps}` reads as "when max_steps is set"; text around the ${...}
        # leaves a string, which the model refuses rather than reading it as true.
        return bool(value)
    return value


def _kind_checks(spec: TopologySpec, sources: SourceMap) -> list[Diagnostic]:
    """Checks each registered kind declares: its required field, fields of other kinds,
    its own checks; and that overrides are keyed by replica index."""
    errors = []
    owners = option_owners()
    for name, group in spec.nodes.items():
        kind = get_kind(group.kind)
        if kind.required and getattr(group, kind.required, None) is None:
            errors.append(
                Diagnostic(
                    f"group '{name}' (kind {group.kind}) needs '{kind.required}'",
                    sources.pos(("nodes", name), key=True),
                    f"add  {kind.required}: {kind.example}" if kind.example else None,
                )
            )
        for field, kinds in owners.items():
            if field not in kind.fields and field in group.model_fields_set:
                errors.append(
                    Diagnostic(
                        f"'{field}' does not apply to group '{name}' of kind {group.kind} "
                        f"(it is for kind {' / '.join(kinds)})",
                        sources.pos(("nodes", name, field), key=True),
                    )
                )
        for field, message in kind.checks(group.options()):
            errors.append(
                Diagnostic(f"group '{name}': {message}", sources.pos(("nodes", name, field)))
            )
        for key in group.overrides:
            if not key.isdigit():
                errors.append(
                    Diagnostic(
                        f"overrides of group '{name}' are keyed by replica index, got '{key}'",
                        sources.pos(("nodes", name, "overrides", key), key=True),
                    )
                )
    return errors


def load_spec(
    path: Path | str, overrides: list[str] | None = None, carried: list[str] | None = None
) -> LoadedSpec:
    """Read ``path`` and everything it extends, apply ``-p`` overrides and validate.

    ``carried`` are ``-p`` values from before (a running program's, which ``topo apply``
    starts from): ``overrides`` change them by name, and one naming a parameter the file
    does not declare is dropped (listed in ``dropped``), not an error."""
    path = Path(path)
    doc = _load_with_extends(path)
    data: dict[str, Any] = doc.data
    raw_params = data.get("params")
    declared: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
    kept = [t for t in carried or [] if override_name(t) in declared]
    dropped = tuple(t for t in carried or [] if override_name(t) not in declared)
    given = merge_overrides(kept, overrides or [])
    params = resolve_params(data.get("params"), given, doc.sources)
    scope = {name: p.value for name, p in params.items()}
    errors: list[Diagnostic] = []
    interpolated = {
        k: (v if k == "params" else _interpolate(v, scope, doc.sources, (k,), errors))
        for k, v in data.items()
    }
    if errors:
        raise TopoError(errors)
    model = topology_model()
    try:
        spec = model.model_validate(interpolated)
    except ValidationError as exc:
        raise TopoError(diagnostics_from(exc, interpolated, doc.sources, model)) from None
    errors = _kind_checks(spec, doc.sources) or check_node_counts(spec, doc.sources)
    if errors:
        raise TopoError(errors)
    return LoadedSpec(
        doc.file, spec, params, doc.sources, interpolated, data, doc.tree, tuple(given), dropped
    )


__all__ = ["GroupSpec", "LoadedSpec", "TopologySpec", "load_spec"]
