"""Tab completion of values: ``--backend`` names, ``-p`` parameter names of the file on
the command line, run ids. Each answers from what is cheap to read (entry points, the
``params:`` lines of the file, the run index), never by compiling anything: a Tab must
answer in a fraction of a second on a busy machine."""

from __future__ import annotations

import os
import re
from pathlib import Path

import typer

BACKENDS_GROUP = "topo.backends"  # the entry-point group topo.backends.base reads
_KEY = re.compile(r"^( *)([A-Za-z_][A-Za-z0-9_.-]*)\s*:")
_TOP = re.compile(r"^params\s*:\s*(#.*)?$")


def complete_backend(incomplete: str) -> list[str]:
    """The installed backends (topo's own and plug-ins) whose name starts so."""
    from importlib.metadata import entry_points

    names = {ep.name for ep in entry_points(group=BACKENDS_GROUP)}
    return sorted(n for n in names if n.startswith(incomplete))


def declared_params(text: str) -> list[str]:
    """The names under the top-level ``params:`` block of a topology's text, read line by
    line (no YAML parser): what ``-p NAME=VALUE`` can set. Flow style (``params: {...}``)
    and included files are not read."""
    names: list[str] = []
    inside, indent = False, None
    for line in text.splitlines():
        if not inside:
            inside = bool(_TOP.match(line))
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        depth = len(line) - len(line.lstrip(" "))
        if depth == 0:
            break
        if indent is None:
            indent = depth
        found = _KEY.match(line)
        if found and depth == indent:
            names.append(found.group(2))
    return names


def _words() -> list[str]:
    """The command line being completed, from the shell's completion request (typer passes
    the completion functions no words: bash sets ``COMP_WORDS``, zsh and fish
    ``_TYPER_COMPLETE_ARGS``)."""
    from typer._click.shell_completion import split_arg_string

    line = os.environ.get("COMP_WORDS") or os.environ.get("_TYPER_COMPLETE_ARGS") or ""
    try:
        return split_arg_string(line)
    except ValueError:
        return line.split()


def _topology_file(ctx: typer.Context, args: list[str]) -> Path | None:
    """The FILE of the command being completed: parsed already, or a word naming a YAML file."""
    given = ctx.params.get("file")
    candidates = [given] if given else []
    candidates += [w for w in [*args, *_words()] if w.endswith((".yaml", ".yml"))]
    for candidate in candidates:
        path = Path(candidate)
        if path.is_file():
            return path
    return None


def complete_param(ctx: typer.Context, args: list[str], incomplete: str) -> list[str]:
    """``-p`` completions: ``NAME=`` for each parameter of the file on the line."""
    if "=" in incomplete:
        return []
    path = _topology_file(ctx, args)
    if path is None:
        return []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [f"{n}=" for n in declared_params(text) if n.startswith(incomplete)]


def complete_run(incomplete: str) -> list[str]:
    """Run ids starting with ``incomplete``, newest first (the machine's run index)."""
    from topo.runs.index import run_ids

    return [r for r in run_ids() if r.startswith(incomplete)]
