"""What every command shares: the ``-p`` option, loading a topology, printing diagnostics,
and the options of the backend ``--backend`` names (``topo run``, ``topo plan``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from topo.cli.complete import complete_param
from topo.cli.consoles import console
from topo.cli.helpfmt import Rows, TopoCommand
from topo.diagnostics import TopoError, render_diagnostics
from topo.ir import Program

if TYPE_CHECKING:
    from topo.api import Loaded
    from topo.backends.base import BackendOption

ParamsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        "-p",
        metavar="NAME=VALUE",
        help="Override a parameter declared under params: (repeatable), e.g. -p num_actors=64.",
        autocompletion=complete_param,
    ),
]
FileArgument = Annotated[
    Path, typer.Argument(metavar="FILE", help="Topology YAML file.", show_default=False)
]

stderr = console(stderr=True, highlight=False, soft_wrap=True, emoji=False)  # ":100:" is a line
# Piped output is not cut to 80 columns (tables keep whole target paths) and its lines end
# without the spaces rich pads table cells with (topo.cli.consoles).
stdout = console(highlight=False, emoji=False, width=None if sys.stdout.isatty() else 160)


def fail(error: TopoError) -> typer.Exit:
    """Print a user error with its positions and return the exit to raise (code 1)."""
    render_diagnostics(error.diagnostics, stderr)
    return typer.Exit(1)


def load_program(file: Path, params: list[str] | None, *, check_imports: bool = False) -> Program:
    """``topo.api.load`` (the one load path of the CLI and the API) for a command: on bad
    input print the errors and exit 1."""
    return load_topology(file, params, check_imports=check_imports).program


def load_topology(file: Path, params: list[str] | None, *, check_imports: bool = False) -> Loaded:
    """``topo.api.load``: the program and its resolved YAML text; on bad input print the
    errors and exit 1."""
    from topo.api import load

    try:
        return load(file, params or [], check_imports=check_imports)
    except TopoError as error:
        raise fail(error) from None


# -- the options of the backend named by --backend ------------------------------------

_NAME, _DECLARED, _VALUES = "topo.backend", "topo.backend.declared", "topo.backend.values"


USAGE_EXIT = 2  # a command-line mistake, as click exits for an unknown option


def error(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` and return the exit to raise (code 1, or ``code``)."""
    stderr.print(f"[red]error:[/] {escape(message)}")
    return typer.Exit(code)


class Refused(Exception):
    """A command line ``BackendCommand`` refuses (an unknown backend, an option it does not
    take, a bad value): printed as ``error: ...``, exit 2 like click's usage errors."""


class BackendCommand(TopoCommand):
    """A command with ``--backend NAME`` that also takes the options the backend declares
    (``Backend.options``) as flags: ``topo run FILE -b ssh --hosts H``. The backend is read
    from the command line (``topo.cli.early.named_backend``, as ``--backend`` is
    everywhere) and its flags are taken out before typer parses the rest; the command's
    ``backend`` parameter is given that name (or the preset one: ``topo run --from``) and
    ``backend_options(ctx)`` the values of its flags. An option of another backend, one
    no backend has, a bad value or a missing option the backend needs exits 2 (a usage
    error) naming the option and the backend."""

    default_backend: str | None = None

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # ctx: click's Context
        try:
            return self._parse(ctx, args)
        except Refused as refused:
            if ctx.resilient_parsing:  # shell completion: as much as parses, nothing said
                return []
            raise error(str(refused), USAGE_EXIT) from None

    def _parse(self, ctx: Any, args: list[str]) -> list[str]:
        from topo.cli.early import named_backend

        default, preset = self.preset(args)
        name = named_backend(args, default)
        declared: tuple[BackendOption, ...] = ()
        mine = {opt for param in self.get_params(ctx) for opt in param.opts}
        # Completing a line without flags of the backend: its module is not imported.
        quick = ctx.resilient_parsing and not _foreign_flags(args, mine)
        if name is not None and not quick:
            from topo.backends.base import BackendNotFound, backend_options

            try:
                declared = backend_options(name)
            except BackendNotFound as exc:
                raise Refused(str(exc)) from None
        for option in declared:
            if option.flag in mine:
                raise Refused(f"--backend {name} declares {option.flag}, which topo already has")
        values, rest = _take_options(args, declared, f"--backend {name}")
        if preset and name == default:
            values = {**_typed(preset, declared), **values}
        ctx.meta.update({_NAME: name, _DECLARED: declared, _VALUES: values})
        try:
            parsed = super().parse_args(ctx, rest)
        except Exception as exc:  # click's NoSuchOption (typer has its own copy of click)
            if type(exc).__name__ != "NoSuchOption":
                raise
            flag = str(getattr(exc, "option_name", ""))
            raise self._no_such_option(flag, name, declared, exc) from None
        parsed_name = ctx.params.get("backend")
        preset_taken = named_backend(args, None) is None and parsed_name == self.default_backend
        if parsed_name != name and not preset_taken:  # e.g. -qb NAME among short flags
            raise Refused(
                f"--backend {parsed_name}: give the backend on its own, as -b NAME or "
                "--backend NAME"
            )
        ctx.params["backend"] = name  # typer's reading agrees; a preset one replaces it
        for option in declared:
            if option.required and option.name not in values:
                raise Refused(
                    f"--backend {name} needs {option.flag} {_metavar(option)} ({option.help})"
                )
        return parsed

    def preset(self, args: list[str]) -> tuple[str | None, dict[str, Any]]:
        """The backend used when the command line names none, and values of its options
        taken unless given (``topo run --from`` takes the recorded ones)."""
        return self.default_backend, {}

    def _no_such_option(
        self, flag: str, name: str | None, declared: tuple[BackendOption, ...], exc: Exception
    ) -> Exception:
        from topo.backends.base import backends_taking

        owners = " or ".join(backends_taking(flag))
        if owners and name is None:
            return Refused(f"{flag} only applies to --backend {owners}; name it with --backend")
        if owners:
            return Refused(f"{flag} only applies to --backend {owners} (not {name})")
        if name is None:
            return exc
        takes = ", ".join(o.flag for o in declared) or "none"
        possible = getattr(exc, "possibilities", None)
        guess = f"; did you mean {' or '.join(possible)}?" if possible else ""
        return Refused(
            f"no such option {flag}: neither topo {self.name} nor --backend {name} takes it "
            f"(the backend's options: {takes}){guess}"
        )

    def extra_panels(self, ctx: Any) -> list[tuple[str, Rows]]:
        """A panel of the backend's own options, after topo's."""
        declared: tuple[BackendOption, ...] = ctx.meta.get(_DECLARED, ())
        if not declared:
            return []
        rows = []
        for option in declared:
            needed = " [red](required)[/]" if option.required else ""
            rows.append((f"{option.flag} {_metavar(option)}".strip(), escape(option.help) + needed))
        return [(f"Options of --backend {ctx.meta[_NAME]}", rows)]


def backend_options(ctx: typer.Context) -> dict[str, Any]:
    """The options of its backend a ``BackendCommand`` was given, by keyword."""
    return dict(ctx.meta.get(_VALUES, {}))


def _foreign_flags(args: list[str], mine: set[str]) -> bool:
    """Whether ``args`` hold a long flag the command itself does not have (one of the
    backend's, or a mistake)."""
    for word in args:
        if word == "--":
            break
        if word.startswith("--") and word.partition("=")[0] not in mine:
            return True
    return False


_METAVARS = {str: "TEXT", int: "INTEGER", float: "NUMBER", Path: "PATH", bool: ""}


def _metavar(option: BackendOption) -> str:
    return option.metavar or _METAVARS.get(option.type, "VALUE")


def _take_options(
    args: list[str], declared: tuple[BackendOption, ...], backend: str
) -> tuple[dict[str, Any], list[str]]:
    """The values of the ``declared`` flags in ``args`` (``--hosts H``, ``--hosts=H``,
    ``--ship``) and the other words, in order; everything after ``--`` is left alone."""
    by_flag = {o.flag: o for o in declared}
    values: dict[str, Any] = {}
    rest: list[str] = []
    words = iter(args)
    for word in words:
        if word == "--":
            rest += [word, *words]
            break
        flag, eq, text = word.partition("=")
        option = by_flag.get(flag)
        if option is None:
            rest.append(word)
        elif option.type is bool:
            if eq:
                raise Refused(f"{flag} of {backend} is a flag: it takes no value")
            values[option.name] = True
        else:
            if not eq:
                following = next(words, None)
                if following is None:
                    raise Refused(f"{flag} of {backend} needs a value ({_metavar(option)})")
                text = following
            values[option.name] = _convert(option, text, backend)
    return values, rest


def _typed(values: dict[str, Any], declared: tuple[BackendOption, ...]) -> dict[str, Any]:
    """Option values read back from JSON as the backend takes them (paths as ``Path``);
    values of options the backend does not declare are left out."""
    return {
        o.name: Path(values[o.name]) if o.type is Path else values[o.name]
        for o in declared
        if o.name in values
    }


def _convert(option: BackendOption, text: str, backend: str) -> Any:
    if option.type is Path:
        return Path(text)
    try:
        return option.type(text)
    except ValueError:
        raise Refused(
            f"{option.flag} of {backend} takes {_metavar(option)}, not {text!r}"
        ) from None
