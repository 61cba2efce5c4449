"""``topo`` imports only what the command given needs (``topo.cli.lazy``), converts plain
option values without pydantic (``topo.cli.coerce``), and completes values on Tab
(``topo.cli.complete``) through the real completion protocol."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import topo
from topo.cli.complete import complete_run, declared_params
from topo.cli.lazy import COMMANDS, HELP

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "topologies").glob("*.yaml"))
HEAVY = ("pydantic", "ruamel.yaml", "topo.ir", "topo.api", "topo.backends", "topo.loader", "zmq")

# A prelude printing the imported modules to stderr at exit (the last line).
MODULES_AT_EXIT = (
    "import atexit, sys\natexit.register(lambda: print(sorted(sys.modules), file=sys.stderr))"
)

# A stand-in for a light command module (as topo.cli.operate is meant to be): registered
# through COMMANDS like the real ones, it prints its converted values and what got imported.
FAKE_MODULE = '''
from pathlib import Path
from typing import Annotated
import sys
import typer
from topo.cli.app import app

@app.command("fake")
def fake(
    runs: Annotated[list[str] | None, typer.Argument()] = None,
    every: Annotated[bool, typer.Option("-a")] = False,
    lines: Annotated[int, typer.Option("-n", min=0)] = 10,
    grace: Annotated[float | None, typer.Option("--grace", min=0.0)] = None,
    where: Annotated[Path, typer.Option("--dir")] = Path("runs"),
) -> None:
    """A light command."""
    heavy = [m for m in HEAVY if m in sys.modules]
    print(json.dumps({"runs": runs, "a": every, "n": lines, "grace": grace,
                      "dir": str(where), "dir_is_path": isinstance(where, Path), "heavy": heavy}))
'''


def _topo(
    *argv: str, prelude: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``topo ARGV`` in a fresh interpreter, after ``prelude`` (Python) ran."""
    code = f"{prelude}\nfrom topo.cli import main\nmain()"
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200", **(env or {})),
    )


@pytest.fixture
def fake_command(tmp_path: Path) -> str:
    """A prelude registering the ``fake`` command from a module in ``tmp_path``."""
    (tmp_path / "fake_cmd.py").write_text(
        f"import json\nHEAVY = {HEAVY!r}\n" + FAKE_MODULE, encoding="utf-8"
    )
    return (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "from topo.cli import lazy; lazy.COMMANDS['fake'] = 'fake_cmd'"
    )


def test_the_help_listing_imports_no_command_and_matches_the_commands() -> None:
    listing = MODULES_AT_EXIT
    lazy = _topo("--help", prelude=listing)
    everything = "import importlib\nfrom topo.cli.lazy import COMMANDS, module_exists\n" + (
        "for m in set(COMMANDS.values()):\n    if module_exists(m): importlib.import_module(m)"
    )
    full = _topo("--help", prelude=everything)
    assert lazy.returncode == 0 == full.returncode, lazy.stderr + full.stderr
    assert lazy.stdout == full.stdout  # HELP is what each command says of itself
    imported = eval(lazy.stderr.strip().splitlines()[-1])
    assert set(imported) & {*COMMANDS.values(), *HEAVY} == set()
    for name in HELP:
        assert name in lazy.stdout


def test_a_command_imports_only_its_own_module() -> None:
    listing = (
        "import atexit, sys\natexit.register(lambda: print(sorted(sys.modules), file=sys.stderr))"
    )
    done = _topo("schema", "--path", prelude=listing)
    assert done.returncode == 0, done.stderr
    imported = eval(done.stderr.strip().splitlines()[-1])
    assert "topo.cli.schema" in imported
    others = {m for m in set(COMMANDS.values()) if m != "topo.cli.schema"}
    assert others & set(imported) == set()


def test_version_answers_without_the_command_line_interface() -> None:
    code = (
        "import sys; sys.argv[1:] = ['--version']\nfrom topo.command import main\nmain()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('typer', 'rich', 'topo.'))))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr
    first, loaded = done.stdout.splitlines()
    assert first == f"topo {topo.__version__}" and eval(loaded) == ["topo.command"]


def test_a_light_command_converts_its_values_without_pydantic(fake_command: str) -> None:
    done = _topo(
        "fake", "r1", "r2", "-a", "-n", "3", "--grace", "2.5", "--dir", "x/y", prelude=fake_command
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got == {
        "runs": ["r1", "r2"],
        "a": True,
        "n": 3,
        "grace": 2.5,
        "dir": "x/y",
        "dir_is_path": True,
        "heavy": [],
    }
    defaults = json.loads(_topo("fake", prelude=fake_command).stdout)
    assert defaults["runs"] is None and defaults["n"] == 10 and defaults["grace"] is None
    assert defaults["heavy"] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-n", "many"], "Input should be a valid integer"),
        (["-n", "-1"], "Input should be greater than or equal to 0"),
        (["--grace", "soon"], "Input should be a valid number"),
        (["--nope"], "No such option: --nope"),
    ],
)
def test_a_bad_value_is_typers_usage_error_exit_2(
    fake_command: str, argv: list[str], message: str
) -> None:
    done = _topo("fake", *argv, prelude=fake_command)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_command_whose_module_is_missing_is_not_offered() -> None:
    ghost = "from topo.cli import lazy; lazy.COMMANDS['ghost'] = 'topo.cli.no_such_module'"
    helped = _topo("--help", prelude=ghost)
    assert helped.returncode == 0 and "ghost" not in helped.stdout and "validate" in helped.stdout
    done = _topo("ghost", prelude=ghost)
    assert done.returncode == 2 and "No such command 'ghost'" in done.stderr


# --- completion, through the protocol the shell script speaks ---------------------------------


def _complete(line: str, prelude: str = "") -> list[str]:
    """What ``topo`` answers to bash's completion request for ``line`` (the cursor at its
    end; a trailing space starts a new word)."""
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    env = {"_TOPO_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(cword)}
    done = _topo(prelude=prelude, env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done.stdout.split()


def test_tab_completes_command_names_without_importing_them() -> None:
    listing = MODULES_AT_EXIT
    assert _complete("topo va") == ["validate"]
    assert {"validate", "plan", "run", "graph"} <= set(_complete("topo "))
    env = {"_TOPO_COMPLETE": "complete_bash", "COMP_WORDS": "topo p", "COMP_CWORD": "1"}
    done = _topo(prelude=listing, env=env)
    assert set(done.stdout.split()) >= {"plan", "plot"}
    imported = eval(done.stderr.strip().splitlines()[-1])
    assert set(imported) & {*COMMANDS.values(), *HEAVY} == set()


def test_tab_completes_backend_names_from_the_entry_points() -> None:
    file = "examples/topologies/consumer_producers.yaml"
    assert _complete(f"topo run {file} --backend ") == ["procs", "ray", "slurm", "ssh", "threads"]
    assert _complete(f"topo run {file} -b t") == ["threads"]
    assert _complete(f"topo plan {file} --backend s") == ["slurm", "ssh"]


def test_tab_completes_the_parameters_of_the_file_on_the_line() -> None:
    file = "examples/topologies/consumer_producers.yaml"
    assert _complete(f"topo run {file} -p ") == ["num_producers=", "work_items="]
    assert _complete(f"topo run -b threads {file} -p w") == ["work_items="]
    assert _complete(f"topo validate {file} --param num") == ["num_producers="]
    assert _complete("topo run -p ") == []  # no file on the line yet: nothing to offer
    distributed = "examples/topologies/acme_distributed.yaml"
    assert _complete(f"topo graph {distributed} -p num_a") == [
        "num_actors=",
        "num_actors_per_node=",
    ]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_cheap_reading_of_params_finds_what_the_loader_finds(example: Path) -> None:
    loaded = topo.load(example)
    assert declared_params(example.read_text(encoding="utf-8")) == list(loaded.spec.params)


def test_declared_params_reads_only_the_top_level_block() -> None:
    text = (
        "name: x\n# params: not this\nparams:\n  # a comment\n  alpha: {default: 1}\n\n"
        "  beta:\n    default: 2\n    help: 'gamma: no'\nnodes:\n  n:\n    params: no\n"
    )
    assert declared_params(text) == ["alpha", "beta"]
    assert declared_params("name: x\nnodes: {}\n") == []


def test_run_ids_complete_from_the_run_index(monkeypatch: pytest.MonkeyPatch) -> None:
    if "topo.runs.index" not in sys.modules:
        try:
            import topo.runs.index  # noqa: F401
        except ImportError:
            assert complete_run("") == []  # not installed yet: nothing, no error
    index = types.ModuleType("topo.runs.index")
    index.run_ids = lambda: ["acme-20260101-1", "acme-20260102-2", "dial-20260103-1"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "topo.runs.index", index)
    assert complete_run("acme") == ["acme-20260101-1", "acme-20260102-2"]
    assert complete_run("") == ["acme-20260101-1", "acme-20260102-2", "dial-20260103-1"]
