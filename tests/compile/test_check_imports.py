"""``topo validate --check-imports`` imports targets exactly as ``topo run`` does, binds each
node's arguments to its target's signature, and says plainly when a module does not exist."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from topo.compile import compile_spec
from topo.diagnostics import TopoError
from topo.loader import load_spec
from topo.targets import TargetError, import_target, prepare_all

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def isolated_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """sys.path restored after the test, and modules it imported from tmp folders dropped."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith(("chk_", "shadowpkg", "nosuch_")):
            del sys.modules[name]


def _errors(path: Path) -> list[Any]:
    with pytest.raises(TopoError) as info:
        compile_spec(load_spec(path), check_imports=True)
    return info.value.diagnostics


def _topo_elsewhere(cwd: Path, *args: str, pre: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(NO_COLOR="1", COLUMNS="200")
    code = f"{pre}from topo.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)  # fmt: skip


@pytest.mark.parametrize("pre", ["", "import examples; "], ids=["plain", "namespace-first"])
def test_check_imports_resolves_like_run_from_another_directory(tmp_path: Path, pre: str) -> None:
    # With the rl extra, dm-haiku installs a top-level namespace package 'examples' that
    # hides the project's examples/ unless the project root is found from the file.
    example = ROOT / "examples/topologies/consumer_producers.yaml"
    done = _topo_elsewhere(tmp_path, "validate", "--check-imports", "-q", str(example), pre=pre)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_namespace_package_does_not_hide_the_project(
    tmp_path: Path, isolated_imports: None
) -> None:
    site = tmp_path / "site" / "shadowpkg"
    site.mkdir(parents=True)  # a namespace portion (no __init__.py), as dm-haiku's examples
    (site / "other.py").write_text("")
    project = tmp_path / "proj"
    (project / "shadowpkg").mkdir(parents=True)
    (project / "shadowpkg" / "__init__.py").write_text("")
    (project / "shadowpkg" / "agents.py").write_text("class Agent:\n    def run(self): ...\n")
    (project / "topologies").mkdir()
    path = project / "topologies" / "t.yaml"
    path.write_text("name: t\nnodes:\n  a: {target: shadowpkg.agents:Agent}\n")
    sys.path.insert(0, str(tmp_path / "site"))
    import shadowpkg  # noqa: F401  -- the namespace package is imported first

    program = compile_spec(load_spec(path), check_imports=True)
    assert program.groups[0].target == "shadowpkg.agents:Agent"
    assert import_target("shadowpkg.agents:Agent", str(path)).__module__ == "shadowpkg.agents"


WORKER = """
class Worker:
    def __init__(self, rate: float, peer=None, name: str = "w") -> None:
        self.rate = rate

    def run(self) -> None:
        pass
"""


def _project(tmp_path: Path, module: str, topology: str) -> Path:
    (tmp_path / f"{module}.py").write_text(WORKER)
    path = tmp_path / "t.yaml"
    path.write_text(topology)
    return path


def test_an_unexpected_argument_is_reported_where_it_is_written(
    tmp_path: Path, isolated_imports: None, run_topo: Any
) -> None:
    path = _project(
        tmp_path,
        "chk_extra",
        "name: t\nnodes:\n  other: {target: chk_extra:Worker, args: {rate: 1}}\n"
        "  w:\n    target: chk_extra:Worker\n    args:\n      rate: 2.0\n"
        "      peer: '@other'\n      colour: red\n",
    )
    [d] = _errors(path)
    assert d.message == "group 'w': chk_extra:Worker takes no argument 'colour'"
    assert d.pos is not None and (d.pos.line, d.pos.col) == (9, 7)
    assert d.hint == "its arguments: rate, peer, name"
    assert run_topo("validate", path).exit_code == 0  # only --check-imports imports
    result = run_topo("validate", "--check-imports", path)
    assert result.exit_code == 1
    assert f"{path}:9:7: error: group 'w': chk_extra:Worker takes no argument" in result.stderr


def test_a_missing_argument_is_reported_at_the_group(
    tmp_path: Path, isolated_imports: None
) -> None:
    path = _project(
        tmp_path,
        "chk_missing",
        "name: t\nnodes:\n  w:\n    target: chk_missing:Worker\n    count: 2\n"
        "    overrides: {'1': {rate: 1.0}}\n"
        "  v:\n    target: chk_missing:Worker\n    overrides: {'0': {rate: 1.0, size: 3}}\n",
    )
    found = {(d.message, d.pos.line, d.pos.col) for d in _errors(path) if d.pos is not None}
    assert found == {
        ("group 'w': chk_missing:Worker needs the argument 'rate', which args does not give", 3, 3),
        ("group 'v': chk_missing:Worker takes no argument 'size'", 9, 34),
    }


def test_a_reference_counts_as_a_given_argument(tmp_path: Path, isolated_imports: None) -> None:
    path = _project(
        tmp_path,
        "chk_refs",
        "name: t\nnodes:\n  a: {target: chk_refs:Worker, args: {rate: 1.0}}\n"
        "  b: {target: chk_refs:Worker, args: {rate: '${2 * 1.5}', peer: '@a'}}\n",
    )
    assert len(compile_spec(load_spec(path), check_imports=True).nodes) == 2


def test_a_module_that_does_not_exist_says_so(tmp_path: Path, isolated_imports: None) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("name: t\nnodes:\n  a:\n    target: nosuch_pkg_q.sub:Thing\n")
    [d] = _errors(path)
    assert "no module named 'nosuch_pkg_q.sub'" in d.message
    assert "project root" not in d.message
    assert d.pos is not None and (d.pos.line, d.pos.col) == (4, 13)
    [problem] = prepare_all(str(path), ["nosuch_pkg_q.sub"])  # what topo run prints
    assert problem == "cannot import 'nosuch_pkg_q.sub': no module named 'nosuch_pkg_q.sub'"


def test_project_root_advice_when_the_module_is_there_but_hidden(
    tmp_path: Path, isolated_imports: None
) -> None:
    # another regular package 'chk_hidden' is imported first; the project's has the module
    other = tmp_path / "other" / "chk_hidden"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    project = tmp_path / "proj"
    (project / "chk_hidden").mkdir(parents=True)
    (project / "chk_hidden" / "__init__.py").write_text("")
    (project / "chk_hidden" / "mod.py").write_text("X = 1\n")
    sys.path.insert(0, str(tmp_path / "other"))
    import chk_hidden  # noqa: F401

    with pytest.raises(TargetError) as info:
        import_target("chk_hidden.mod:X", str(project / "t.yaml"))
    message = str(info.value)
    assert "no module named 'chk_hidden.mod'" in message
    assert f"although 'chk_hidden.mod' is in {project}" in message
    assert "run topo from the project root or add it to PYTHONPATH" in message


def test_import_roots_are_the_folders_the_targets_come_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an ssh host needs on its path: the current directory for a module there, the
    nearest folder above the topology file holding a package, nothing for an installed
    module; the current directory first."""
    from topo.targets import import_roots

    project = tmp_path / "project"
    (project / "pkg" / "sub").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "topologies").mkdir()
    here = tmp_path / "here"
    here.mkdir()
    (here / "local_mod.py").write_text("")
    monkeypatch.chdir(here)
    source = str(project / "topologies" / "t.yaml")
    assert import_roots(source, ["pkg.sub.mod", "json", "local_mod"]) == [here, project]
    assert import_roots(source, ["json"]) == []
    assert import_roots(None, ["pkg.sub.mod"]) == []
