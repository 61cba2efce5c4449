"""How every ``topo`` command describes itself: one convention for usage lines, help
pages and the command listing.

* Metavars are uppercase words: ``FILE``, ``RUN``, ``NAME=VALUE``; an option without
  one shows its type (``TEXT``, ``INTEGER``, ``NUMBER``, ``PATH``); a flag shows none.
* Usage: ``topo status [OPTIONS] [RUN]``: an optional argument in brackets, a required
  one bare (``topo graph [OPTIONS] FILE``); the argument panel writes them the same way.
* A command's docstring: its first sentence is its summary, one line in ``topo -h``; the
  rest is a paragraph under it in the command's own help (line breaks of the source
  are not kept).
* Options read ``-p, --param NAME=VALUE`` with the description beside them; an entry
  too long for its column puts the description on the next line, so descriptions keep
  most of an 80-column terminal. A bound (``[≥ 0]``) and a default follow the
  description.

``TopoCommand`` is the class of every command (``app.TopoTyper`` makes it the default);
rich is imported only when help is printed.
"""

from __future__ import annotations

import inspect
import re
from typing import TYPE_CHECKING, Any

from typer import _click
from typer.core import TyperArgument, TyperCommand, TyperOption

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

TYPE_NAMES = {str: "TEXT", int: "INTEGER", float: "NUMBER", bool: "", object: "VALUE"}
LEFT_MAX = 28  # the widest an option's names get beside their description
GAP = 2  # spaces between an option's names and its description
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\[])")


def summary(text: str | None) -> str:
    """The first sentence of a docstring, on one line (``topo -h`` lists it)."""
    first = inspect.cleandoc(text or "").partition("\n\n")[0]
    first = " ".join(first.split())
    return _SENTENCE.split(first, maxsplit=1)[0]


def details(text: str | None) -> list[str]:
    """A docstring's paragraphs after its summary, each on one line."""
    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(text or "").split("\n\n")]
    paragraphs = [p for p in paragraphs if p]
    if not paragraphs:
        return []
    first, *rest = paragraphs
    head = summary(first)
    tail = first[len(head) :].strip()
    return [tail, *rest] if tail else rest


def argument_name(param: _click.Parameter) -> str:
    """``FILE`` for a required argument, ``[RUN]`` for an optional one (``...`` after one
    that takes several)."""
    name = param.metavar or (param.name or "").upper()
    name = name if param.required else f"[{name}]"
    return f"{name}..." if param.nargs != 1 else name


def value_name(param: _click.Parameter) -> str:
    """What an option's value is called (``""`` for a flag)."""
    if isinstance(param, TyperOption) and (param.is_flag or param.count):
        return ""
    if param.metavar:
        return param.metavar
    if not isinstance(param, TyperOption):
        return (param.name or "").upper()
    descriptor = param.type_descriptor
    if descriptor.is_choice:
        return "|".join(str(getattr(c, "value", c)) for c in descriptor.choices or ())
    if descriptor.is_path:
        return "PATH"
    annotation = descriptor.annotation
    if getattr(annotation, "__origin__", None) is list:
        annotation = annotation.__args__[0]
    return TYPE_NAMES.get(annotation, "VALUE") if isinstance(annotation, type) else "VALUE"


def option_names(param: TyperOption, indent: bool) -> str:
    """``-p, --param NAME=VALUE``, ``    --live / --no-live`` (``indent``: a long-only
    option lines up under the long names of options that have a short one)."""
    shorts = [o for o in param.opts if not o.startswith("--")]
    longs = [o for o in param.opts if o.startswith("--")]
    names = ", ".join([*shorts, *longs])
    if param.secondary_opts:
        names += " / " + ", ".join(param.secondary_opts)
    if indent and not shorts:
        names = "    " + names
    value = value_name(param)
    return f"{names} {value}" if value else names


def bound(param: _click.Parameter) -> str:
    """``[≥ 0]``, ``[≤ 9]``, ``[0–65535]`` for a number option with bounds, else ``""``."""
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if isinstance(param, TyperOption) and param.count:
        return ""
    if low is None and high is None:
        return ""
    if high is None:
        return f"[≥ {low:g}]"
    if low is None:
        return f"[≤ {high:g}]"
    return f"[{low:g}–{high:g}]"


def default_text(param: _click.Parameter, ctx: _click.Context) -> str:
    """``[default: procs]`` when the parameter shows its default, else ``""`` (as typer
    decides it)."""
    if not isinstance(param, TyperOption | TyperArgument):
        return ""
    value = param._extract_default_help_str(ctx=ctx)
    as_text = isinstance(param.show_default, str)
    if not as_text and (value is None or not (param.show_default or ctx.show_default)):
        return ""
    shown = param._get_default_string(ctx=ctx, show_default_is_str=as_text, default_value=value)
    return f"[default: {shown}]" if shown else ""


class TopoCommand(TyperCommand):
    """A ``topo`` command: its help and usage in topo's convention (the module
    docstring); arguments without a metavar are named by their uppercase name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument) and param.metavar is None and param.name:
                param.metavar = param.name.upper()  # usage, panels, "Missing argument 'RUN'"

    def collect_usage_pieces(self, ctx: _click.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                pieces.append(argument_name(param))
        return pieces

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        print_help(self, ctx, self.extra_panels(ctx))

    def extra_panels(self, ctx: _click.Context) -> list[tuple[str, Rows]]:
        """Panels after the options: (title, [(names, description as rich markup)])."""
        return []


Rows = list[tuple[str, str]]  # (names, description as rich markup)


def print_help(
    command: _click.Command,
    ctx: _click.Context,
    extra: list[tuple[str, Rows]] | None = None,
    commands: Rows | None = None,
) -> None:
    """Print a command's help page: usage, description, arguments, options (and
    ``extra`` panels), the ``commands`` of a group, the epilog."""
    from rich.text import Text

    console = _console()
    width = console.width
    console.print()
    console.print(
        Text(" Usage: ", style="yellow") + Text(command.get_usage(ctx).removeprefix("Usage: "))
    )
    console.print()
    paragraphs = [summary(command.help), *details(command.help)]
    for i, paragraph in enumerate(p for p in paragraphs if p):
        _paragraph(console, Text.from_markup(paragraph, style="" if i == 0 else "dim"), width)
        console.print()
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    arguments = [p for p in params if isinstance(p, TyperArgument)]
    options = [p for p in params if isinstance(p, TyperOption)]
    if arguments:
        rows = [(argument_name(p), _described(p, ctx)) for p in arguments]
        _panel(console, "Arguments", rows, width)
    indent = any(not o.startswith("--") for p in options for o in p.opts)
    panels: dict[str, list[tuple[str, Text]]] = {}
    for p in options:
        title = getattr(p, "rich_help_panel", None) or "Options"
        panels.setdefault(title, []).append((option_names(p, indent), _described(p, ctx)))
    for title, rows in panels.items():
        _panel(console, title, rows, width)
    for title, given in extra or []:
        _panel(console, title, [(n, Text.from_markup(d)) for n, d in given], width)
    if commands:
        listed = [(n, Text.from_markup(d)) for n, d in commands]
        _panel(console, "Commands", listed, width, names_style="bold cyan")
    if command.epilog:
        console.print()
        _paragraph(console, Text.from_markup(" ".join(command.epilog.split())), width)
        console.print()


def _described(param: _click.Parameter, ctx: _click.Context) -> Text:
    """A parameter's help (rich markup) with its bound, default and whether it is
    required, these dim."""
    from rich.text import Text

    text = Text.from_markup(" ".join((getattr(param, "help", None) or "").split()))
    notes = [bound(param), default_text(param, ctx), "[required]" if param.required else ""]
    for note in (n for n in notes if n):
        text.append(" " if text.plain else "")
        text.append(note, style="dim")
    return text


def _console() -> Console:
    from rich.console import Console
    from typer import rich_utils

    return Console(
        highlight=False,
        color_system=rich_utils.COLOR_SYSTEM,
        force_terminal=rich_utils.FORCE_TERMINAL,
        width=rich_utils.MAX_WIDTH,
    )


def _paragraph(console: Console, text: Text, width: int) -> None:
    """``text`` wrapped to the width, one space in from the left, no trailing spaces."""
    for line in text.wrap(console, max(width - 2, 20)):
        line.rstrip()
        console.print(" ", line, sep="", soft_wrap=True)


def _panel(
    console: Console,
    title: str,
    rows: list[tuple[str, Text]],
    width: int,
    names_style: str = "",
) -> None:
    """A titled box of ``names  description`` rows; see the module docstring."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    inner = max(width - 4, 30)  # the box's borders and padding
    left = min(max((len(names) for names, _ in rows), default=0), LEFT_MAX)
    right = max(inner - left - GAP, 20)
    lines: list[Text] = []
    for names, text in rows:
        shown = _names(names, names_style)
        wrapped = list(text.wrap(console, right)) if text.plain else [Text("")]
        if len(names) > left:  # its own line; the description under it
            lines.append(shown)
            pad = left + GAP
            lines += [Text(" " * pad) + w for w in wrapped if w.plain]
            continue
        first, *rest = wrapped
        lines.append(shown + Text(" " * (left - len(names) + GAP)) + first)
        lines += [Text(" " * (left + GAP)) + w for w in rest]
    for line in lines:
        line.rstrip()
        line.no_wrap = True
    console.print(
        Panel(Group(*lines), title=title, title_align="left", border_style="dim", width=width)
    )


def _names(names: str, style: str) -> Text:
    """Option names in cyan and the value's name in yellow (or all in ``style``)."""
    from rich.text import Text

    if style:
        return Text(names, style=style)
    text = Text()
    for word in re.split(r"(\s+|,|/)", names):
        if word.startswith("-"):
            text.append(word, style="bold cyan")
        elif word.strip(" ,/"):
            text.append(word, style="yellow")
        else:
            text.append(word)
    return text
