"""Every command's help at 80 columns follows one convention (``topo.cli.helpfmt``):
no ``<bool>``-style type names, uppercase metavars (``[RUN]`` optional, ``FILE``
required) in usage lines, argument panels and beside options, a description column that
keeps most of the line, one-line summaries in ``topo -h``, and no trailing spaces."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from topo.cli.helpfmt import details, summary
from topo.cli.lazy import COMMANDS, HELP

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 80
DESCRIPTION_AT_LEAST = 35  # cells of the description column
METAVAR = r"(?:[A-Z][A-Z0-9_=.]*|[a-z0-9_-]+(?:\|[a-z0-9_-]+)+)"  # FILE, NAME=VALUE, a|b
ARGUMENT = rf"(?:\[{METAVAR}\]|{METAVAR})(?:\.\.\.)?"


def _help(*argv: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS=str(WIDTH), NO_COLOR="1")
    env.pop("TERMINAL_WIDTH", None)
    done = subprocess.run(
        [sys.executable, "-m", "topo", *argv, "-h"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _panels(text: str) -> dict[str, list[str]]:
    """Panel title -> its content lines (between the borders, the borders cut off)."""
    panels: dict[str, list[str]] = {}
    title = ""
    for line in text.splitlines():
        top = re.match(r"╭─ (.+?) ─", line)
        if top:
            title = top.group(1)
            panels[title] = []
        elif line.startswith("│") and line.endswith("│") and title:
            panels[title].append(line[2:-2])
    return panels


def _check_page(text: str, command: str) -> None:
    lines = text.splitlines()
    assert all(len(line) <= WIDTH and line == line.rstrip() for line in lines), text
    assert not re.search(r"<(?:bool|str|int|float|path|list\[\w+\])(?: range)?>", text), text
    assert not re.search(r"\[x?[<>]=", text), text  # no "[x>=0.0]" range notation
    usage = next(line.strip() for line in lines if line.strip().startswith("Usage: "))
    pattern = rf"Usage: topo {re.escape(command)} \[OPTIONS\]( {ARGUMENT})*"
    if not command:
        pattern = r"Usage: topo \[OPTIONS\] COMMAND \[ARGS\]\.\.\."
    assert re.fullmatch(pattern, usage.replace("  ", " ")), usage
    panels = _panels(text)
    for name in (n for title, rows in panels.items() if title == "Arguments" for n in rows):
        if not name.startswith(" "):
            assert re.match(rf"{ARGUMENT}  ", name), name  # FILE or [RUN], as in usage
    for title, rows in panels.items():
        inner = WIDTH - 4
        for row in rows:
            if row.startswith(" ") and row.strip() and not row.lstrip().startswith("--"):
                start = len(row) - len(row.lstrip())
                assert inner - start >= DESCRIPTION_AT_LEAST, (title, row)  # a continuation
            names = re.match(r"(-\w, )?(--[\w-]+(?: / --[\w-]+)?)(?: (\S+))?  ", row.lstrip())
            if names and names.group(3):
                assert re.fullmatch(METAVAR, names.group(3)), row


@pytest.mark.parametrize("command", list(dict.fromkeys(["", *COMMANDS])))
def test_every_help_page_at_80_columns_follows_the_convention(command: str) -> None:
    _check_page(_help(*([command] if command else [])), command)


def test_the_listing_has_one_line_summaries_of_every_command() -> None:
    text = _help()
    rows = _panels(text)["Commands"]
    assert [row.split()[0] for row in rows] == list(COMMANDS), rows  # no continuation line
    for row in rows:
        name, shown = row.split(None, 1)
        assert shown.strip() == HELP[name], row
        assert "\n" not in HELP[name] and HELP[name].endswith((".", ")"))


def test_summary_is_the_first_sentence_and_the_rest_a_paragraph() -> None:
    doc = """Run FILE: start every node.
        Then show it,
        and stop on Ctrl-C.

        Exit codes: see docs."""
    assert summary(doc) == "Run FILE: start every node."
    assert details(doc) == ["Then show it, and stop on Ctrl-C.", "Exit codes: see docs."]
    assert summary("Print a run's output (-f: follow it, e.g. -p x=1). More.") == (
        "Print a run's output (-f: follow it, e.g. -p x=1)."
    )


def test_help_summaries_are_the_commands_docstrings() -> None:
    import importlib

    from topo.cli.app import app

    for module in set(COMMANDS.values()):
        importlib.import_module(module)
    docs = {info.name: inspect.getdoc(info.callback) for info in app.registered_commands}
    for name in COMMANDS:
        assert HELP[name] == summary(docs[name]), name
        assert len(HELP[name]) <= WIDTH - 14, name  # one line beside the names at 80
