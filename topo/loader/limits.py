"""How many nodes one topology may ask for, so ``count: 1000000000`` fails in a moment
instead of compiling for hours (compiling costs about 20 µs and 3 KB per node).

The limit is the same per group and per program; ``TOPO_MAX_NODES`` raises (or lowers) it.
"""

from __future__ import annotations

import os

from topo.diagnostics import Diagnostic
from topo.loader.models import TopologySpec
from topo.syntax.source import SourceMap

DEFAULT_MAX_NODES = 100_000
ENV_VAR = "TOPO_MAX_NODES"


def max_nodes() -> tuple[int, Diagnostic | None]:
    """The node limit in force, and a diagnostic if ``TOPO_MAX_NODES`` is not a number."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_MAX_NODES, None
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        return DEFAULT_MAX_NODES, Diagnostic(
            f"{ENV_VAR}={raw!r} is not a positive whole number",
            hint=f"unset it to use the default of {DEFAULT_MAX_NODES:,}",
        )
    return value, None


def check_node_counts(spec: TopologySpec, sources: SourceMap) -> list[Diagnostic]:
    """Diagnostics for groups (and a program) with more nodes than the limit."""
    limit, bad_env = max_nodes()
    if bad_env is not None:
        return [bad_env]

    def hint(needed: int) -> str:
        return (
            "the limit keeps compiling within seconds and about 1 GB of memory; "
            f"if you really run more, set {ENV_VAR}={needed} in the environment"
        )

    errors = []
    total = 0
    biggest: tuple[int, str] = (0, "")
    for name, group in spec.nodes.items():
        if group.enabled is False:
            continue
        count = 1 if group.count is None else group.count
        total += count
        biggest = max(biggest, (count, name))
        if count > limit:
            errors.append(
                Diagnostic(
                    f"group '{name}' has {count:,} nodes, more than the limit of {limit:,}",
                    sources.pos(("nodes", name, "count")),
                    hint(count),
                )
            )
    if not errors and total > limit:
        errors.append(
            Diagnostic(
                f"the program has {total:,} nodes, more than the limit of {limit:,} "
                f"(the largest group is '{biggest[1]}' with {biggest[0]:,})",
                sources.pos(("nodes", biggest[1], "count")),
                hint(total),
            )
        )
    return errors
