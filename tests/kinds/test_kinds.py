"""A node kind added from outside topo (register_kind, and a real entry point) works in
every stage: validate, compile, JSON IR, drawing, topo run and topo export."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from greeter_program import make_program
from rich.text import Text

import topo.launchpad as lp
from tests.export.irview import differences, view
from topo.compile import compile_spec
from topo.diagnostics import TopoError
from topo.export import export_program
from topo.ir import Program, dumps, loads
from topo.kinds import (
    NodeKind,
    Options,
    UnknownKindError,
    all_kinds,
    get_kind,
    kind_names,
    register_kind,
)
from topo.loader import load_spec
from topo.loader.schema import topology_schema
from topo.render import build_view, to_dot, to_mermaid, to_tree

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

GREETING = """
name: hello_kind
stop: {{timeout_s: 60}}
nodes:
  hello:
    kind: greeter
    greeting: hi
    out: {out}
    args: {{times: 2}}
"""


def _write(tmp_path: Path, text: str = GREETING) -> Path:
    path = tmp_path / "hello.yaml"
    path.write_text(text.format(out=tmp_path / "greeting.txt"))
    return path


def test_registered_kind_compiles_round_trips_and_draws(greeter: None, tmp_path: Path) -> None:
    program = compile_spec(load_spec(_write(tmp_path)))
    [group] = program.groups
    assert (group.kind, group.target, group.draw) == ("greeter", "kind_plugin:greet", "greeter")
    [node] = program.nodes
    assert dict(node.args) == {"greeting": "hi", "out": str(tmp_path / "greeting.txt"), "times": 2}
    assert loads(dumps(program)) == program
    assert loads(dumps(program)).groups[0].draw == "greeter"
    view = build_view(program)
    assert view.nodes["hello"].role == "greeter"
    # every picture draws the node as the kind's look says
    dot = to_dot(view)
    assert '"hello" [label="hello\\nkind_plugin:greet", shape=note, style="filled"' in dot
    assert 'fillcolor="#e0f7fa"' in dot
    mermaid = to_mermaid(view)
    assert 'n_hello[/"hello<br/>kind_plugin:greet"/]' in mermaid
    assert "classDef greeter fill:#e0f7fa,stroke:#00838f" in mermaid
    assert "class n_hello greeter" in mermaid
    [group_branch] = to_tree(view).children
    label = group_branch.children[0].label
    assert isinstance(label, Text) and label.plain.startswith("hello  [greeter]")
    assert label.style == "bold cyan"


def test_registered_kind_runs(greeter: None, tmp_path: Path, topo_launch: Callable) -> None:
    run = topo_launch(_write(tmp_path))
    assert run.wait(60) == 0
    assert (tmp_path / "greeting.txt").read_text() == "hihi"


def test_kind_fields_are_checked_like_builtin_ones(greeter: None, tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("name: t\nnodes:\n  a: {kind: greeter}\n")
    with pytest.raises(TopoError) as info:
        load_spec(path)
    [d] = info.value.diagnostics
    assert d.message == "group 'a' (kind greeter) needs 'greeting'"
    assert d.hint == "add  greeting: hello"
    path.write_text("name: t\nnodes:\n  a: {target: m:C, greeting: hi}\n")
    with pytest.raises(TopoError) as info:
        load_spec(path)
    [d] = info.value.diagnostics
    assert "'greeting' does not apply to group 'a' of kind courier" in d.message
    assert "(it is for kind greeter)" in d.message
    assert d.pos is not None and (d.pos.line, d.pos.col) == (3, 20)
    path.write_text("name: t\nnodes:\n  a: {kind: greeter, greting: hi}\n")
    with pytest.raises(TopoError) as info:
        load_spec(path)
    assert any("greeting" in (d.hint or "") for d in info.value.diagnostics)
    kind = topology_schema()["$defs"]["GroupSpec"]["properties"]["kind"]
    assert "greeter" in json.dumps(kind)
    assert "greeter: writes a greeting to a file" in kind["description"]


def test_unregistered_kind_is_refused(tmp_path: Path) -> None:
    assert "greeter" not in kind_names()
    path = _write(tmp_path)
    with pytest.raises(TopoError) as info:
        load_spec(path)
    assert "'kind' of group 'hello' must be one of" in info.value.diagnostics[0].message
    with pytest.raises(UnknownKindError, match=r"unknown node kind 'greeter' \(known kinds: cou"):
        get_kind("greeter")


def test_a_kind_name_is_registered_once(greeter: None) -> None:
    class Nothing(Options):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register_kind(NodeKind("greeter", "again", Nothing))
    with pytest.raises(TypeError, match="must default to None"):

        class Required(Options):
            x: int

        NodeKind("bad", "a required option", Required)


def _plugin_dir(tmp_path: Path) -> Path:
    """An installed distribution (as pip leaves it) whose entry point declares the kind."""
    site = tmp_path / "site"
    dist = site / "topo_greeter-0.1.dist-info"
    dist.mkdir(parents=True)
    for module in ("kind_plugin.py", "greeter_program.py"):
        (site / module).write_text((HERE / module).read_text())
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: topo-greeter\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[topo.kinds]\ngreeter = kind_plugin:GREETER\n")
    return site


@pytest.mark.slow
def test_kind_from_an_entry_point_works_in_every_command(greeter: None, tmp_path: Path) -> None:
    site = _plugin_dir(tmp_path)
    path = _write(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(NO_COLOR="1", COLUMNS="200")

    def topo(*args: str) -> subprocess.CompletedProcess[str]:
        code = f"import sys; sys.path.insert(0, {str(site)!r}); from topo.cli import main; main()"
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              text=True, cwd=tmp_path, env=env, timeout=120)  # fmt: skip

    done = topo("validate", str(path))
    assert done.returncode == 0, done.stderr
    assert "greeter" in done.stdout and "kind_plugin:greet" in done.stdout
    done = topo("plan", str(path), "--json")
    assert done.returncode == 0, done.stderr
    [group] = json.loads(done.stdout)["groups"]
    assert (group["kind"], group["target"], group["draw"]) == (
        "greeter", "kind_plugin:greet", "greeter"
    )  # fmt: skip
    done = topo("graph", str(path), "--dot")
    assert done.returncode == 0, done.stderr
    assert '"hello" [label="hello\\nkind_plugin:greet"' in done.stdout
    done = topo("run", str(path), "-b", "threads", "--log-dir", str(tmp_path / "runs"), "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "greeting.txt").read_text() == "hihi"
    # topo export writes a Launchpad program using the kind as YAML with the kind's own
    # fields, which loads back and compiles to the same program.
    exported = tmp_path / "exported" / "greetings.yaml"
    exported.parent.mkdir()
    done = topo("export", "greeter_program:make_program", "-p", f"out={tmp_path}", "-o",
                str(exported))  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = exported.read_text()
    assert "  hello:\n    kind: greeter\n    count: 2\n    greeting: hi 0\n" in text
    assert "    overrides:\n      '1':\n        greeting: hi 1\n" in text
    done = topo("plan", str(exported), "--json")
    assert done.returncode == 0, done.stderr
    _assert_same_program(make_program(str(tmp_path)), loads(done.stdout), text)
    # Without the distribution on the path the kind is unknown again.
    no_plugin = subprocess.run(
        [sys.executable, "-c", "from topo.cli import main; main()", "validate", str(path)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert no_plugin.returncode == 1
    assert "'kind' of group 'hello' must be one of" in no_plugin.stderr


def _assert_same_program(lp_program: lp.Program, got: Program, text: str) -> None:
    """The program read back from ``text`` (compiled to ``got``) is ``lp_program``'s."""
    compiled = lp.compile_program(lp_program)
    exported = export_program(compiled.program, schema="s.json")
    body = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert body == [ln for ln in exported.text.splitlines() if not ln.startswith("#")]
    diff = differences(view(compiled.program, exported), view(got))
    assert not diff, "\n".join(diff) + "\n\n" + text


def _topo_imports(package: str) -> set[str]:
    out: set[str] = set()
    for file in (ROOT / "topo" / package).glob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.add(node.module)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
    return {m for m in out if m == "topo" or m.startswith("topo.")}


def test_layering_of_render_and_kinds() -> None:
    render = _topo_imports("render")
    # the IR, and the kinds for how each role is drawn
    assert all(m.startswith(("topo.ir", "topo.render", "topo.kinds")) for m in render), render
    kinds = _topo_imports("kinds")
    assert not any(m.startswith("topo.backends") for m in kinds), kinds


def _string_constants(path: Path) -> set[str]:
    """The string literals of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef)
        and n.body and isinstance(n.body[0], ast.Expr)
    }  # fmt: skip
    return {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    }


def test_export_and_render_know_no_kind_by_name() -> None:
    """What export and drawing do per kind comes from the kinds' declarations."""
    builtin = {k.name for k in all_kinds()[:4]} | {"tables", "checkpoint", "refresh_ms"}
    builtin |= {"topo.nodes:Counter", "topo.nodes:StepsLimiter", "counter", "limiter"}
    files = [*(ROOT / "topo" / "render").glob("*.py"), *(ROOT / "topo" / "export").glob("*.py")]
    for file in files:
        assert not _string_constants(file) & builtin, file


def test_reverb_references_wire_through_the_kind_client() -> None:
    from topo.kinds import client_for

    replay: Any = client_for("reverb", "replay", 1.0)
    assert type(replay).__name__ == "ReverbClient" and replay.node_id == "replay"
    handle: Any = client_for("cacher", "cache", 2.0)
    assert type(handle).__name__ == "Handle"


def test_a_kind_cannot_take_over_a_common_group_field(tmp_path: Path) -> None:
    from pydantic import Field

    from topo.kinds import unregister_kind
    from topo.loader.models import topology_model

    class Counting(Options):
        count: int | None = Field(None)

    register_kind(NodeKind("counting", "redefines count", Counting))
    try:
        with pytest.raises(ValueError, match="'count' is a field of every group"):
            topology_model()
    finally:
        unregister_kind("counting")
    assert "counting" not in json.dumps(topology_schema())  # built again without it
