"""What a node kind is: one declaration that every stage (load, compile, run, export,
draw) reads.

A kind names its own YAML fields (a small pydantic model), the target that builds its
nodes, the arguments it takes from those fields and back (for ``topo export``), which of
them hold ``module:attr`` targets to import, how its edges are labelled, how a node of it
runs, how a reference to one becomes a live object in a peer, and how it is drawn. Kinds
import nothing from ``topo.backends``: the backends read them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from topo.vocab import EdgeVia


class Options(BaseModel):
    """Base of a kind's own YAML fields. Every field must default to None: the fields of
    all kinds share one mapping per group, and the kind's ``required`` field is checked
    by the loader with a hint."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _no_args(options: Any) -> dict[str, Any]:
    return {}


def _no_checks(options: Any) -> list[tuple[str, str]]:
    return []


@dataclass(frozen=True)
class Look:
    """How nodes of one drawing role look in every picture: a Graphviz ``shape`` and
    ``style``, the Mermaid brackets around the label, the fill and stroke colours
    (``#rrggbb``) and the rich style of the terminal tree."""

    shape: str = "box"
    style: str = "filled"
    mermaid: tuple[str, str] = ("[", "]")
    fill: str = "#ffffff"
    stroke: str = "#5f6368"
    term: str = ""


DEFAULT_LOOK = Look()
"""The look of a role no kind declares."""


@dataclass(frozen=True)
class NodeKind:
    """A node kind.

    ``args(options)`` gives the arguments the kind passes its target from its own fields;
    ``checks(options)`` gives ``(field, message)`` problems; ``via`` maps an argument path
    to the edge label of references in it; ``served`` nodes get an RPC server for the
    built object (its ``run()`` called if present), others are called and the result's
    ``run()`` called; ``runnable`` is True or the message ``topo run`` prints; ``client`` is
    a ``module:attr`` factory ``(node_id, deadline_s) -> object`` that turns a reference
    to a node of this kind into a live object inside a peer.

    ``fields_of(args)`` is the inverse of ``args``: a node's arguments -> ``(the kind's
    YAML fields, the remaining arguments)``; by default every argument ``args`` produces
    under a field's own name goes back to that field. ``draw`` is the drawing role of the
    kind's nodes, ``draw_targets`` the role of nodes built by particular targets (a
    courier serving a counter), ``looks`` how the roles the kind declares are drawn."""

    name: str
    help: str
    options: type[Options]
    required: str | None = None
    example: str = ""
    builtin_target: str | None = None
    args: Callable[[Any], dict[str, Any]] = _no_args
    import_fields: tuple[str, ...] = ()
    via: Mapping[str, EdgeVia] = field(default_factory=dict, hash=False)
    checks: Callable[[Any], list[tuple[str, str]]] = _no_checks
    served: bool = True
    runnable: bool | str = True
    client: str = "topo.runtime:Handle"
    draw: str = ""
    fields_of: Callable[[Mapping[str, Any]], tuple[dict[str, Any], dict[str, Any]]] | None = None
    draw_targets: Mapping[str, str] = field(default_factory=dict, hash=False)
    looks: Mapping[str, Look] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not self.draw:
            object.__setattr__(self, "draw", self.name)
        unset = [n for n, f in self.options.model_fields.items() if f.is_required()]
        if unset:
            raise TypeError(f"node kind {self.name!r}: option fields must default to None: {unset}")

    @property
    def fields(self) -> tuple[str, ...]:
        """The kind's own YAML fields."""
        return tuple(self.options.model_fields)

    def options_of(self, values: Any) -> Any:
        """This kind's options taken from an object carrying them as attributes (a group)."""
        return self.options.model_construct(
            **{name: getattr(values, name, None) for name in self.fields}
        )

    @property
    def arg_names(self) -> tuple[str, ...]:
        """The arguments the kind passes from its own fields (reverb: tables, checkpoint_dir,
        checkpoint_every_s), found by calling ``args`` on unset fields."""
        try:
            return tuple(self.args(self.options.model_construct()))
        except Exception:  # an args() that needs its required field set: same names
            return self.fields

    def split_args(self, args: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(fields, remaining arguments)`` of a node's arguments: the kind's ``fields_of``,
        or each argument of :attr:`arg_names` named like a field back to that field."""
        if self.fields_of is not None:
            return self.fields_of(args)
        own = set(self.arg_names) & set(self.fields)
        return (
            {k: v for k, v in args.items() if k in own},
            {k: v for k, v in args.items() if k not in own},
        )

    def role_for(self, target: str) -> str:
        """The drawing role of this kind's nodes built by ``target``."""
        return self.draw_targets.get(target, self.draw)

    def edge_via(self, arg_path: str) -> EdgeVia | None:
        """The label of edges from references in argument ``arg_path``, if the kind sets it."""
        return self.via.get(arg_path)


__all__ = ["DEFAULT_LOOK", "Look", "NodeKind", "Options"]
