"""The import graph keeps the rooms of topo apart (docs/architecture.md, "Rooms").

Every module under topo/ is parsed with ``ast`` (nothing is imported), and every
import statement counts, including those inside functions and ``TYPE_CHECKING``
blocks: a lazy import is still a dependency. Importing ``a.b.c`` runs the packages
``a.b`` and ``a`` first, so a module depends on its parent packages too. The rules
are checked on what a module reaches *transitively*: a room may not reach a room
outside its rule through a third one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "topo"


def module_name(path: Path) -> str:
    """``topo/ir/codec.py`` -> ``topo.ir.codec``; a package's ``__init__`` is the package."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def all_modules() -> frozenset[str]:
    """Every module and package under topo/."""
    return frozenset(module_name(p) for p in PACKAGE.rglob("*.py"))


def _absolute(module: str | None, level: int, importer: str, is_package: bool) -> str:
    """The absolute name a (possibly relative) ``from ... import`` refers to."""
    if level == 0:
        return module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def imports_of(path: Path) -> set[str]:
    """The topo modules imported by one file (``from topo import x`` counts as ``topo.x``
    when ``topo.x`` is a module, else as ``topo``)."""
    importer = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, importer, path.name == "__init__.py")
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in all_modules() else base)
    return {m for m in found if m == "topo" or m.startswith("topo.")}


@cache
def graph() -> dict[str, frozenset[str]]:
    """Module -> the topo modules it imports."""
    return {module_name(p): frozenset(imports_of(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def within(module: str, packages: Iterable[str]) -> bool:
    """Whether ``module`` is one of ``packages`` or inside one."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def violations(
    layer: str,
    *,
    forbidden: Iterable[str] = (),
    allowed: Iterable[str] | None = None,
    edges: dict[str, frozenset[str]] | None = None,
) -> list[str]:
    """``importer -> imported`` for every import out of ``layer`` that breaks the rule:
    into a ``forbidden`` package, or (when ``allowed`` is given) outside ``allowed``."""
    forbidden, allowed_list = list(forbidden), None if allowed is None else list(allowed)
    out = []
    for importer, imported in (graph() if edges is None else edges).items():
        if not within(importer, [layer]):
            continue
        for m in sorted(imported):
            bad = within(m, forbidden) or (allowed_list is not None and not within(m, allowed_list))
            if bad:
                out.append(f"{importer} -> {m}")
    return out


# Each room and the rooms its modules may reach, directly or through others. A room
# not named here fails the test: a new room gets a rule when it is made.
BASE = {"diagnostics", "vocab", "targets"}
BUILD = BASE | {"syntax", "kinds", "loader", "ir", "compile", "runtime"}
RUN = BUILD | {"rundir", "backends", "supervisor", "runs", "snapshots", "root"}
RULES: dict[str, set[str]] = {
    "root": set(),  # topo/__init__: lazy names only, no static import
    "diagnostics": set(),
    "vocab": set(),
    "targets": set(),
    "rundir": set(),  # the run directory's names and files: the standard library only
    "syntax": {"diagnostics"},
    "ir": {"diagnostics", "vocab"},
    "runtime": set(),
    "runs": {"rundir"},  # runs as things to operate: the standard library only (fast commands)
    "snapshots": {"diagnostics", "vocab", "ir", "rundir"},
    "kinds": {"vocab", "targets", "runtime"},
    "nodes": {"runtime", "targets"},
    "loader": {"diagnostics", "syntax", "kinds", "targets", "vocab"},
    "compile": {"diagnostics", "syntax", "kinds", "targets", "vocab", "loader", "ir"},
    "render": {"diagnostics", "vocab", "ir", "kinds", "targets"},
    "backends": {"diagnostics", "vocab", "targets", "syntax", "ir", "kinds", "runtime", "root"}
    | {"rundir"},
    "supervisor": {"diagnostics", "vocab", "targets", "syntax", "ir", "kinds", "runtime", "root"}
    | {"rundir", "backends", "runs"},
    "api": RUN,
    "launchpad": RUN | {"api", "nodes"},
    "export": BASE | {"ir", "kinds", "runtime", "nodes", "launchpad"},
    "testing": RUN | {"api", "launchpad", "nodes"},  # the conformance suite runs Launchpad programs
    # the dashboard: a reader of run directories and a client of the control channel,
    # never of the supervisor; it draws with the renderers
    "ui": {"rundir", "runs", "ir", "render", "diagnostics", "vocab", "kinds", "targets"},
    "cli": RUN | {"api", "launchpad", "nodes", "syntax", "render", "export", "ui"},
    "command": RUN | {"api", "launchpad", "nodes", "render", "export", "cli", "ui"},
}
# Rooms split further: these modules reach less than the rest of their room.
SUB_RULES: dict[str, set[str]] = {
    # The Launchpad front end builds the IR; running it is launching/launched/stopping.
    "topo.launchpad.translate": {"diagnostics", "vocab", "targets", "ir", "kinds", "compile"}
    | {"nodes", "runtime", "launchpad"},
}
# Modules of a sub-rule's room that the sub-rule's modules may not reach.
FRONT_END_ONLY = ("topo.launchpad.launching", "topo.launchpad.launched", "topo.launchpad.local")


def room_of(module: str) -> str:
    """``topo.loader.read`` -> ``loader``; the package ``topo`` itself is ``root``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "root"
    return "command" if parts[1] in ("command", "__main__") else parts[1]


@cache
def full_graph() -> dict[str, frozenset[str]]:
    """``graph()`` plus the parent packages every import runs."""
    out = {}
    for module, imported in graph().items():
        deps = set(imported)
        for name in [module, *imported]:
            parts = name.split(".")
            deps.update(".".join(parts[:i]) for i in range(2, len(parts)))
        deps.discard(module)
        out[module] = frozenset(d for d in deps if d in all_modules())
    return out


def reach(module: str, edges: dict[str, frozenset[str]]) -> dict[str, str]:
    """Every module ``module`` reaches -> the module that imports it on the way."""
    via: dict[str, str] = {}
    todo = [module]
    while todo:
        here = todo.pop()
        for nxt in edges.get(here, ()):
            if nxt not in via and nxt != module:
                via[nxt] = here
                todo.append(nxt)
    return via


def path_to(module: str, target: str, via: dict[str, str]) -> str:
    chain = [target]
    while chain[-1] != module:
        chain.append(via[chain[-1]])
    return " -> ".join(reversed(chain))


def transitive_violations(edges: dict[str, frozenset[str]] | None = None) -> list[str]:
    """The import chains that take a module into a room its rule does not allow."""
    edges = full_graph() if edges is None else edges
    out = []
    for module in sorted(edges):
        own = room_of(module)
        allowed = SUB_RULES.get(module, RULES.get(own, set())) | {own}
        via = reach(module, edges)
        for target in sorted(via):
            bad = room_of(target) not in allowed
            bad = bad or (module in SUB_RULES and target in FRONT_END_ONLY)
            if bad:
                out.append(path_to(module, target, via))
    return out


def cycles(edges: dict[str, set[str]] | dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on.discard(w)
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def room_graph(edges: dict[str, frozenset[str]]) -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for module, imported in edges.items():
        mine = rooms.setdefault(room_of(module), set())
        mine.update(room_of(m) for m in imported if room_of(m) != room_of(module))
    return rooms


def test_the_parser_sees_lazy_and_relative_imports() -> None:
    assert "topo.ir.codec" in graph()["topo.ir"]  # from topo.ir.codec import ...
    assert "topo.ir" in graph()["topo.cli.plan"]  # imported inside a function
    assert _absolute("values", 1, "topo.ir.codec", False) == "topo.ir.values"
    assert _absolute(None, 2, "topo.ir", True) == "topo"
    assert "topo.kinds" in full_graph()["topo.kinds.catalog"]  # its package runs first


def test_every_room_has_a_rule() -> None:
    assert sorted({room_of(m) for m in all_modules()} - set(RULES)) == []


def test_no_module_reaches_a_room_its_rule_forbids() -> None:
    assert transitive_violations() == []


def test_the_import_graph_has_no_cycle() -> None:
    assert cycles(dict(graph())) == []


def test_the_rooms_form_no_cycle() -> None:
    assert cycles(room_graph(full_graph())) == []


def test_a_planted_indirect_violation_is_caught() -> None:
    """The checker itself: a lower room that reaches a higher one through a third module
    is reported with the whole chain; a planted cycle is found."""
    edges = dict(full_graph())
    edges["topo.syntax.expr"] = edges["topo.syntax.expr"] | {"topo.kinds.base"}
    found = transitive_violations(edges)
    assert "topo.syntax.expr -> topo.kinds.base" in found
    assert any(
        line.startswith("topo.loader.read -> ") and line.endswith("topo.syntax.expr")
        for line in found
    ) or any("topo.syntax.expr -> topo.kinds.base" in line for line in found)
    edges["topo.ir.values"] = edges["topo.ir.values"] | {"topo.compile.refs"}
    assert any("topo.ir.values" in line for line in transitive_violations(edges))
    assert any("topo.ir.values" in c for c in cycles(edges))
    assert ["compile", "ir"] in cycles(room_graph(edges))


def test_no_module_imports_private_names_of_another() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("topo"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                if private and node.module != "__future__":
                    found.append(f"{module_name(path)}: from {node.module} import {private}")
    assert found == []


def test_topo_itself_uses_the_facade_only_for_its_version() -> None:
    """``topo.stop()`` is for node code; inside topo the real module is imported, so
    the lazy facade hides no dependency from these rules."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "topo" and node.level == 0:
                names = [a.name for a in node.names if f"topo.{a.name}" not in all_modules()]
                if [n for n in names if n not in ("__version__",)]:
                    found.append(f"{module_name(path)}: from topo import {names}")
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "topo"
                and node.attr not in ("__version__", "__file__")
                and f"topo.{node.attr}" not in all_modules()
            ):
                found.append(f"{module_name(path)}: topo.{node.attr}")
    assert found == []


@pytest.mark.slow
def test_one_meaning_per_name() -> None:
    """Names that once meant two things (two ``registry`` and ``lifecycle`` modules, two
    ``compile``, two ``Handle`` classes, ``NodeKind`` as a str and a class, the dashboard's
    own ``RunRecord`` and ``Snapshot`` beside ``run.json``'s and a snapshot's) mean one."""
    for name in ("registry", "lifecycle", "compile"):
        holders = sorted(m for m in all_modules() if m.split(".")[-1] == name)
        assert len(holders) == 1, holders
    for cls in ("Handle", "NodeKind", "RunRecord", "Snapshot"):
        defined = [
            module_name(p)
            for p in PACKAGE.rglob("*.py")
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if (isinstance(node, ast.ClassDef) and node.name == cls)
            or (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == cls for t in node.targets)
                and not module_name(p).startswith("topo.launchpad")  # Launchpad's own alias
            )
        ]
        assert len(defined) == 1, (cls, defined)


def test_load_stage_imports_no_later_stage() -> None:
    later = ["topo.ir", "topo.compile", "topo.backends", "topo.runtime", "topo.render", "topo.cli"]
    assert violations("topo.loader", forbidden=later) == []


def test_ir_imports_only_itself_and_diagnostics() -> None:
    assert violations("topo.ir", allowed=["topo.ir", "topo.diagnostics", "topo.vocab"]) == []


def test_diagnostics_is_the_bottom_layer() -> None:
    assert violations("topo.diagnostics", allowed=[]) == []
    source = (PACKAGE / "diagnostics.py").read_text(encoding="utf-8")
    top_level = [n for n in ast.parse(source).body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert not [ast.unparse(n) for n in top_level if "rich" in ast.unparse(n)]


def test_renderers_read_only_the_ir_and_the_kinds() -> None:
    # the kinds declare each node's drawing role and how it looks
    assert violations("topo.render", allowed=["topo.ir", "topo.render", "topo.kinds"]) == []


def test_compiler_imports_no_backend_runtime_or_cli() -> None:
    forbidden = ["topo.backends", "topo.runtime", "topo.cli"]
    assert violations("topo.compile", forbidden=forbidden) == []


def test_node_kinds_import_no_backend() -> None:
    assert violations("topo.nodes", forbidden=["topo.backends"]) == []
    assert violations("topo.kinds", forbidden=["topo.backends"]) == []


def test_launchpad_builds_the_ir_and_never_reads_yaml() -> None:
    """topo.launchpad is a front end beside the YAML one: it makes the same IR, and its
    compiler (like topo.compile) knows nothing of how programs run."""
    assert violations("topo.launchpad", forbidden=["topo.loader", "topo.cli"]) == []
    running = ["topo.backends", "topo.runtime", "topo.api", "topo.cli", "topo.loader"]
    assert violations("topo.launchpad.translate", forbidden=running) == []
    assert violations("topo.launchpad.nodes", forbidden=running) == []
    assert violations("topo.launchpad.arguments", forbidden=running) == []


def test_rules_catch_a_violation() -> None:
    """The checker itself: a made-up edge into a forbidden layer is reported, and so is
    one outside an allow-list."""
    edges = dict(graph())
    edges["topo.loader.read"] = edges["topo.loader.read"] | {"topo.ir.values"}
    edges["topo.ir.printer"] = edges["topo.ir.printer"] | {"topo.syntax.source"}
    assert violations("topo.loader", forbidden=["topo.ir"], edges=edges) == [
        "topo.loader.read -> topo.ir.values"
    ]
    allowed = ["topo.ir", "topo.diagnostics", "topo.vocab"]
    assert violations("topo.ir", allowed=allowed, edges=edges) == [
        "topo.ir.printer -> topo.syntax.source"
    ]


def test_exporter_reads_the_ir_not_the_yaml_loader_or_backends() -> None:
    """``topo export`` writes YAML from the IR (and compiles Launchpad programs to it): it
    must not lean on the loader it writes for, nor on anything that runs programs."""
    forbidden = [
        "topo.loader",
        "topo.compile.compiler",
        "topo.backends",
        "topo.runtime",
        "topo.cli",
    ]
    assert violations("topo.export", forbidden=forbidden) == []
    assert "topo.ir" in graph()["topo.export.writer"]


def test_remote_backends_share_one_core_and_reach_not_each_other() -> None:
    """ssh and ray (and every later remote backend) differ only in how they reach a host
    and how they place: the remote core (topo.backends.remote) knows no backend, no
    remote backend reaches another's modules, and the core's host side (what an agent
    runs on its host) reaches nothing of its launcher side."""
    edges = full_graph()
    backends = {"ssh": "topo.backends.ssh", "ray": "topo.backends.ray"}
    host_side = ["topo.backends.remote.follow", "topo.backends.remote.host"]
    host_side.append("topo.backends.remote.stream")
    launcher_side = ["topo.backends.remote.fleet", "topo.backends.remote.transport"]
    launcher_side += ["topo.backends.remote.records", "topo.supervisor"]
    found = []
    for module in sorted(edges):
        if within(module, ["topo.backends.remote"]):
            others = list(backends.values())
        elif within(module, backends.values()):
            others = [p for p in backends.values() if not within(module, [p])]
        else:
            continue
        if within(module, host_side):
            others += launcher_side
        via = reach(module, edges)
        found += [path_to(module, t, via) for t in sorted(via) if within(t, others)]
    assert found == []
    assert {"topo.backends.remote.fleet"} <= reach("topo.backends.ssh.backend", edges).keys()
    assert {"topo.backends.remote.fleet"} <= reach("topo.backends.ray.backend", edges).keys()
