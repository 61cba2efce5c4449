"""A topology file compiled for a run (``topo apply RUN FILE``, ``topo diff RUN FILE``):
the run's parameters carried, as ``helm upgrade`` reuses a release's values.

The run's ``-p`` values (as given at its start and as every applied change left them,
``run.json``'s ``params_given``) are the base; the command's ``-p`` change them by name;
``--reset-params`` starts from FILE's defaults instead. A carried value of a parameter
FILE no longer declares is dropped with a note. Only given values are carried, never
resolved ones: a default edited in FILE takes effect for a parameter the run never set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from topo.cli.common import stderr

if TYPE_CHECKING:
    from topo.api import Loaded

ResetParamsOption = Annotated[
    bool,
    typer.Option(
        "--reset-params",
        help="Start from FILE's defaults and only this command's -p (default: the run's "
        "-p values carried, changed by this command's).",
    ),
]


@dataclass(frozen=True)
class ForRun:
    """FILE loaded for a run: what was carried from it, given here, and dropped."""

    loaded: Loaded
    run_id: str
    carried: tuple[str, ...]  # the run's -p values kept (not changed by this command's)
    asked: tuple[str, ...]  # this command's -p
    dropped: tuple[str, ...]  # the run's -p values of parameters FILE does not declare
    reset: bool
    left: tuple[str, ...] = ()  # --reset-params: the run's -p values not carried

    def as_json(self) -> dict[str, Any]:
        """The parameters of the change, for ``--json`` and the change record."""
        return {
            "given": list(self.loaded.spec.given),
            "carried": list(self.carried),
            "asked": list(self.asked),
            "dropped": list(self.dropped),
            "reset": self.reset,
        }

    def lines(self) -> list[str]:
        """``Parameters: num_actors=2 (given), max_actor_steps=null (carried from run
        f04b11df)``; nothing when the run and the command give none."""
        parts = [f"{t} (given)" for t in self.asked]
        parts += [f"{t} (carried from run {self.run_id})" for t in self.carried]
        if self.reset:
            left = f"; not carried: {', '.join(self.left)}" if self.left else ""
            defaults = "the file's defaults otherwise" if parts else "the file's defaults"
            parts.append(f"{defaults} (--reset-params{left})")
        return [f"Parameters: {', '.join(parts)}"] if parts else []

    def notes(self, file: Path) -> list[str]:
        """What was dropped, for stderr."""
        return [
            f"note: the run's -p {t} is dropped: {file.name} declares no parameter "
            f"'{t.partition('=')[0].strip()}'"
            for t in self.dropped
        ]


def load_for_run(
    file: Path,
    run_dir: Path,
    run_id: str,
    params: list[str] | None,
    reset: bool,
    code: int,
) -> ForRun:
    """FILE compiled with the run's parameters as ``topo apply`` runs it (no target is
    imported); a bad file is printed at file:line:col and exits with ``code``."""
    from topo.api import load
    from topo.diagnostics import TopoError, render_diagnostics
    from topo.loader.params import override_name
    from topo.rundir.record import given_params

    recorded = given_params(run_dir)
    base = [] if reset else recorded
    asked = list(params or [])
    try:
        loaded = load(file, asked, carried=base)
    except TopoError as exc:
        render_diagnostics(exc.diagnostics, stderr)
        if base:
            shown = " ".join(f"-p {t}" for t in base)
            stderr.print(
                f"(the run's parameters were carried: {shown}; --reset-params starts "
                "from the file's defaults)",
                highlight=False,
                markup=False,
            )
        raise typer.Exit(code) from None
    names = {override_name(t) for t in asked}
    given = loaded.spec.given
    carried = tuple(t for t in given if override_name(t) not in names)
    mine = tuple(t for t in given if override_name(t) in names)
    left = tuple(recorded) if reset else ()
    return ForRun(loaded, run_id, carried, mine, loaded.spec.dropped, reset, left)
