"""``topo graph`` end to end through typer, on IR JSON files of the seed programs."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import typer
from render_programs import acme_distributed, mava_dial
from render_support import needs_dot
from typer.testing import CliRunner

from topo.ir import dumps
from topo.render import ViewOptions, build_view, to_dot, to_mermaid


@pytest.fixture
def ir_file(tmp_path: Path) -> Path:
    path = tmp_path / "acme.json"
    path.write_text(dumps(acme_distributed(num_actors=64, limiter=False)))
    return path


def run(cli: typer.Typer, *args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["graph", *map(str, args)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_dot_and_mermaid_to_stdout(cli: typer.Typer, ir_file: Path) -> None:
    program = acme_distributed(num_actors=64, limiter=False)
    code, out, _ = run(cli, ir_file, "--dot")
    assert code == 0 and out == to_dot(build_view(program))
    code, out, _ = run(cli, ir_file, "--mermaid", "--expand")
    assert code == 0 and out == to_mermaid(build_view(program, ViewOptions(expand=True)))
    code, out, _ = run(cli, ir_file, "--dot", "--show-disabled", "--collapse-above", "100")
    assert out == to_dot(build_view(program, ViewOptions(collapse_above=100, show_disabled=True)))


def test_default_is_a_tree(cli: typer.Typer, ir_file: Path) -> None:
    code, out, _ = run(cli, ir_file)
    assert code == 0 and "actor \u00d764" in out and "→ replay" in out


def test_group_focus(cli: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "mava.json"
    path.write_text(dumps(mava_dial()))
    code, out, _ = run(cli, path, "--dot", "--group", "trainer")
    assert code == 0
    assert '"trainer"' in out and '"cacher/0"' in out and '"executor/0"' not in out


def test_unknown_group_lists_groups(cli: typer.Typer, ir_file: Path) -> None:
    code, _, err = run(cli, ir_file, "--group", "nosuch")
    assert code == 1
    assert "no group named nosuch" in err and "learner" in err and "Traceback" not in err


@needs_dot
@pytest.mark.parametrize("flag", ["--svg", "--png", "--out"])
def test_svg_and_png_files(cli: typer.Typer, ir_file: Path, tmp_path: Path, flag: str) -> None:
    suffix = ".png" if flag == "--png" else ".svg"
    target = tmp_path / "sub" / f"pic{suffix}"
    code, _, err = run(cli, ir_file, flag, target)
    assert code == 0, err
    data = target.read_bytes()
    if suffix == ".png":
        assert data.startswith(b"\x89PNG")
    else:
        assert ET.fromstring(data).tag.endswith("svg")
    assert f"wrote {target}" in err.replace("\n", "")


@pytest.mark.parametrize(("suffix", "expect"), [(".dot", "digraph"), (".mmd", "flowchart LR")])
def test_out_picks_text_format_by_suffix(
    cli: typer.Typer, ir_file: Path, tmp_path: Path, suffix: str, expect: str
) -> None:
    target = tmp_path / f"g{suffix}"
    code, out, _ = run(cli, ir_file, "--out", target)
    assert code == 0 and out == "" and expect in target.read_text()


@pytest.mark.parametrize(
    "args",
    [
        ("--dot", "--mermaid"),
        ("--out", "x.txt"),
        ("--mermaid", "--out", "x.dot"),
        ("--svg", "a.svg", "--png", "b.png"),
    ],
)
def test_flag_clashes_are_usage_errors(cli: typer.Typer, ir_file: Path, args: tuple[str]) -> None:
    code, _, err = run(cli, ir_file, *args)
    assert code == 2 and "Traceback" not in err


def test_missing_dot_says_how_to_install(
    cli: typer.Typer, ir_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import topo.render.graphviz as gv

    monkeypatch.setattr(gv, "find_dot", lambda: None)
    code, _, err = run(cli, ir_file, "--svg", tmp_path / "x.svg")
    assert code == 1
    assert "apt-get install graphviz" in err.replace("\n", " ")
    assert not (tmp_path / "x.svg").exists()


def test_bad_ir_json_is_a_user_error(cli: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"version": 99}')
    code, _, err = run(cli, path, "--dot")
    assert code == 1 and "not a topo IR JSON file" in err
