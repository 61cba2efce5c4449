"""Commands imported only when they run: ``topo ps`` must not pay for the compiler,
pydantic or the backends that ``topo run`` needs.

``COMMANDS`` maps each command name to the module that registers it on the typer app
(``@app.command(...)``); ``LazyGroup`` (the class of the root group) imports that module
the first time the command is asked for. ``topo --help`` and the completion of command
names list every command from ``HELP`` without importing any of them.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator, MutableMapping
from typing import Any

import typer
from typer import _click
from typer.core import TyperCommand, TyperGroup

# command -> the module whose import registers it, in the order `topo --help` lists them.
COMMANDS: dict[str, str] = {
    "validate": "topo.cli.validate",
    "plan": "topo.cli.plan",
    "diff": "topo.cli.diff",
    "schema": "topo.cli.schema",
    "graph": "topo.cli.graph",
    "run": "topo.cli.run",
    "plot": "topo.cli.plot",
    "export": "topo.cli.export",
    # Operating runs from any shell.
    "ps": "topo.cli.operate",
    "status": "topo.cli.operate",
    "logs": "topo.cli.logs",
    "stop": "topo.cli.operate",
    "rm": "topo.cli.remove",
    "prune": "topo.cli.remove",
    "snapshot": "topo.cli.snapshot",
    "apply": "topo.cli.apply",
    "restart": "topo.cli.restart",
    "stacks": "topo.cli.stacks",
    "top": "topo.cli.top",
    "debug": "topo.cli.debug",
    "attach": "topo.cli.attach",
    "ui": "topo.cli.ui",
}

# command -> its summary as `topo --help` lists it (the first sentence of the command
# function's docstring: topo.cli.helpfmt.summary), so the listing imports nothing.
# tests/cli/test_lazy_cli.py checks it against the real commands. A command missing here
# is imported for the listing instead.
HELP: dict[str, str] = {
    "validate": "Check a topology file and print a summary of it.",
    "plan": "Compile FILE and print the plan of its executables.",
    "diff": "Compare two programs (files or runs) and print the changes.",
    "schema": "Print the JSON Schema of topology files.",
    "graph": "Draw the topology as a graph.",
    "run": "Run FILE: start every node, show their status, stop on Ctrl-C.",
    "plot": "Draw a run's learning curves to a PNG.",
    "export": "Write the topology YAML of a program built in Python.",
    "ps": "List the runs on this machine (-a: ended ones too).",
    "status": "Show one run's nodes once: state, pid, uptime, metrics.",
    "logs": "Print a run's node output (-f: follow it until the run ends).",
    "stop": "Stop runs as Ctrl-C in their terminals would.",
    "rm": "Remove ended or lost runs and what they left.",
    "prune": "Remove every ended and lost run listed here.",
    "snapshot": "Snapshot a live run now, or list a run's snapshots.",
    "apply": "Change a running program into FILE's program.",
    "restart": "Restart one node of a live run now.",
    "stacks": "Print the Python stack of every thread of a live run's nodes.",
    "top": "Show a live table of a run's nodes: CPU, memory, calls, latency.",
    "debug": "Open a pdb session on a node stopped at breakpoint().",
    "attach": "Show a run's live view; Ctrl-C detaches (the run goes on).",
    "ui": "Serve a run's web dashboard on this machine and print its URL.",
}


def module_exists(module: str) -> bool:
    """Whether ``module`` can be imported, found without running it (a few stat calls)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def offered() -> list[str]:
    """The command names whose module is installed, in listing order."""
    found: dict[str, bool] = {}
    return [
        name for name, module in COMMANDS.items() if found.setdefault(module, module_exists(module))
    ]


def build_command(name: str, app: typer.Typer) -> _click.Command | None:
    """Import the module of command ``name`` (it registers the command on ``app``) and
    build its click command; None if the module is not installed or does not register
    ``name``."""
    module = COMMANDS.get(name)
    if module is None or not module_exists(module):
        return None
    importlib.import_module(module)
    import typer.main

    for info in app.registered_commands:
        assert info.callback is not None
        if (info.name or typer.main.get_command_name(info.callback.__name__)) == name:
            return typer.main.get_command_from_info(
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
    return None


class LazyCommands(MutableMapping[str, _click.Command]):
    """The root group's commands: every offered name, each built on first access."""

    def __init__(self, built: MutableMapping[str, _click.Command], app: typer.Typer) -> None:
        self._built = dict(built)
        self._app = app
        self._names: list[str] | None = None

    def names(self) -> list[str]:
        """Offered and already built names, in listing order (computed once)."""
        if self._names is None:
            self._names = list(dict.fromkeys([*offered(), *self._built]))
        return self._names

    def built(self, name: str) -> _click.Command | None:
        """The command if it was built already (nothing is imported)."""
        return self._built.get(name)

    def __getitem__(self, name: str) -> _click.Command:
        command = self._built.get(name)
        if command is None:
            command = build_command(name, self._app)
            if command is None:
                raise KeyError(name)
            self._built[name] = command
        return command

    def __setitem__(self, name: str, command: _click.Command) -> None:
        self._built[name] = command
        self._names = None

    def __delitem__(self, name: str) -> None:
        del self._built[name]
        self._names = None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __contains__(self, name: object) -> bool:
        return name in self._built or name in self.names()


class LazyGroup(TyperGroup):
    """The root ``topo`` group: a command's module is imported when the command runs
    (or is completed); listing commands (``topo --help``, completing a command name)
    uses ``HELP`` instead."""

    typer_app: typer.Typer | None = None  # where the command modules register (set once)

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        assert self.typer_app is not None, "LazyGroup.typer_app is the app to build from"
        self.commands = LazyCommands(self.commands, self.typer_app)
        self._listing = False

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        commands = self.commands
        assert isinstance(commands, LazyCommands)
        if self._listing and cmd_name in HELP and cmd_name in commands:
            built = commands.built(cmd_name)
            return built or TyperCommand(name=cmd_name, help=HELP[cmd_name])
        return commands.get(cmd_name)

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        from topo.cli.helpfmt import print_help, summary

        self._listing = True
        try:
            listed = [(name, self.get_command(ctx, name)) for name in self.list_commands(ctx)]
            commands = [(n, summary(c.help)) for n, c in listed if c is not None and not c.hidden]
            print_help(self, ctx, commands=commands)
        finally:
            self._listing = False

    def shell_complete(self, ctx: _click.Context, incomplete: str) -> list[Any]:
        self._listing = True
        try:
            return super().shell_complete(ctx, incomplete)
        finally:
            self._listing = False
