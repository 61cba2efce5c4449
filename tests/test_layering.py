"""The import graph keeps the pipeline's layers apart (DESIGN.md: no stage reaches back).

Every module under topo/ is parsed with ``ast`` (nothing is imported), and every
import statement counts, including those inside functions and ``TYPE_CHECKING``
blocks: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from functools import cache
from pathlib import Path

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


def test_the_parser_sees_lazy_and_relative_imports() -> None:
    assert "topo.ir.codec" in graph()["topo.ir"]  # from topo.ir.codec import ...
    assert "topo.ir" in graph()["topo.cli.plan"]  # imported inside a function
    assert _absolute("values", 1, "topo.ir.codec", False) == "topo.ir.values"
    assert _absolute(None, 2, "topo.ir", True) == "topo"


def test_load_stage_imports_no_later_stage() -> None:
    later = ["topo.ir", "topo.compile", "topo.backends", "topo.runtime", "topo.render", "topo.cli"]
    assert violations("topo.spec", forbidden=later) == []


def test_ir_imports_only_itself_and_diagnostics() -> None:
    assert violations("topo.ir", allowed=["topo.ir", "topo.diagnostics"]) == []


def test_diagnostics_is_the_bottom_layer() -> None:
    assert violations("topo.diagnostics", allowed=[]) == []
    source = (PACKAGE / "diagnostics.py").read_text(encoding="utf-8")
    top_level = [n for n in ast.parse(source).body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert not [ast.unparse(n) for n in top_level if "rich" in ast.unparse(n)]


def test_renderers_read_only_the_ir() -> None:
    assert violations("topo.render", allowed=["topo.ir", "topo.render"]) == []


def test_compiler_imports_no_backend_runtime_or_cli() -> None:
    forbidden = ["topo.backends", "topo.runtime", "topo.cli"]
    assert violations("topo.compile", forbidden=forbidden) == []


def test_node_kinds_import_no_backend() -> None:
    assert violations("topo.nodes", forbidden=["topo.backends"]) == []
    assert violations("topo.kinds", forbidden=["topo.backends"]) == []


def test_launchpad_builds_the_ir_and_never_reads_yaml() -> None:
    """topo.launchpad is a front end beside the YAML one: it makes the same IR, and its
    compiler (like topo.compile) knows nothing of how programs run."""
    assert violations("topo.launchpad", forbidden=["topo.spec", "topo.cli"]) == []
    running = ["topo.backends", "topo.runtime", "topo.api", "topo.cli", "topo.spec"]
    assert violations("topo.launchpad.compile", forbidden=running) == []
    assert violations("topo.launchpad.nodes", forbidden=running) == []
    assert violations("topo.launchpad.arguments", forbidden=running) == []


def test_rules_catch_a_violation() -> None:
    """The checker itself: a made-up edge into a forbidden layer is reported, and so is
    one outside an allow-list."""
    edges = dict(graph())
    edges["topo.spec.loader"] = edges["topo.spec.loader"] | {"topo.ir.values"}
    edges["topo.ir.printer"] = edges["topo.ir.printer"] | {"topo.spec.source"}
    assert violations("topo.spec", forbidden=["topo.ir"], edges=edges) == [
        "topo.spec.loader -> topo.ir.values"
    ]
    assert violations("topo.ir", allowed=["topo.ir", "topo.diagnostics"], edges=edges) == [
        "topo.ir.printer -> topo.spec.source"
    ]


def test_exporter_reads_the_ir_not_the_yaml_loader_or_backends() -> None:
    """``topo export`` writes YAML from the IR (and compiles Launchpad programs to it): it
    must not lean on the loader it writes for, nor on anything that runs programs."""
    forbidden = ["topo.spec", "topo.compile.compiler", "topo.backends", "topo.runtime", "topo.cli"]
    assert violations("topo.export", forbidden=forbidden) == []
    assert "topo.ir" in graph()["topo.export.writer"]
