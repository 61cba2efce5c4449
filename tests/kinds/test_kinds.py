"""A node kind added from outside topo (register_kind, and a real entry point) works in
every stage: validate, compile, JSON IR, drawing and topo run."""

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

from topo.compile import compile_spec
from topo.diagnostics import TopoError
from topo.ir import dumps, loads
from topo.kinds import NodeKind, Options, UnknownKindError, get_kind, kind_names, register_kind
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
    assert '"hello" [label="hello\\nkind_plugin:greet"' in to_dot(view)
    assert "hello" in to_mermaid(view)
    assert to_tree(view) is not None


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
    (site / "kind_plugin.py").write_text((HERE / "kind_plugin.py").read_text())
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: topo-greeter\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[topo.kinds]\ngreeter = kind_plugin:GREETER\n")
    return site


def test_kind_from_an_entry_point_works_in_every_command(tmp_path: Path) -> None:
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
    # Without the distribution on the path the kind is unknown again.
    no_plugin = subprocess.run(
        [sys.executable, "-c", "from topo.cli import main; main()", "validate", str(path)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert no_plugin.returncode == 1
    assert "'kind' of group 'hello' must be one of" in no_plugin.stderr


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
    assert all(m.startswith(("topo.ir", "topo.render")) for m in render), render
    kinds = _topo_imports("kinds")
    assert not any(m.startswith("topo.backends") for m in kinds), kinds


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
