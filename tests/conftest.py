"""Fixtures shared by the spec, compile and CLI tests: write a topology, load it, run the CLI."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import textwrap
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# topo.testing is a plugin (below) whose asserts pytest rewrites: registered before the
# imports under here load it.
pytest.register_assert_rewrite("topo.testing")

from typer.testing import CliRunner, Result  # noqa: E402

from tests.backends.ssh import testhosts  # noqa: E402
from tests.backends.ssh.testhosts import HostSet  # noqa: E402
from topo.diagnostics import TopoError  # noqa: E402
from topo.ir import Program  # noqa: E402

# The topo_launch fixture (starts programs, checks by pid that nothing is left behind).
pytest_plugins = ["topo.testing", "tests.scheduling"]


# Runs the tests start are listed in a state directory of their own, not the user's
# (`topo ps`); every subprocess inherits it.
os.environ["TOPO_HOME"] = tempfile.mkdtemp(prefix="topo-home-")
atexit.register(shutil.rmtree, os.environ["TOPO_HOME"], True)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "topologies"

# XLA compiles the same small networks in hundreds of the tests' node processes: JAX's
# persistent cache (on disk, the suite's own) makes each after the first a lookup (a
# DQN learner's start 2.1 -> 0.7 CPU seconds). Every subprocess inherits it.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(ROOT / "test-results" / "jax-cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))

WriteTopo = Callable[..., Path]
CompileText = Callable[..., Program]
ErrorsOf = Callable[..., "Failure"]
RunTopo = Callable[..., Result]


def compile_file(path: Path | str, params: list[str] | tuple[str, ...] = ()) -> Program:
    """Load and compile a topology file the way ``topo validate`` does."""
    from topo.compile import compile_spec
    from topo.loader import load_spec

    return compile_spec(load_spec(path, overrides=list(params)))


@pytest.fixture
def compile_path() -> Callable[..., Program]:
    """``compile_path(path, params=())``: :func:`compile_file` as a fixture for test modules."""
    return compile_file


@pytest.fixture
def write_topo(tmp_path: Path) -> WriteTopo:
    """``write_topo(text, name="topology.yaml")``: dedent ``text`` into a file under tmp_path."""

    def write(text: str, name: str = "topology.yaml") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return write


@pytest.fixture
def compile_text(write_topo: WriteTopo) -> CompileText:
    """``compile_text(text, *params)``: the Program a topology text compiles to."""

    def run(text: str, *params: str) -> Program:
        return compile_file(write_topo(text), params)

    return run


class Failure:
    """The TopoError a topology raised, with helpers to look at its diagnostics."""

    def __init__(self, error: TopoError) -> None:
        self.error = error
        self.diagnostics = error.diagnostics

    @property
    def headline(self) -> str:
        """The only diagnostic as ``file:line:col: error: message`` (fails if there are more)."""
        assert len(self.diagnostics) == 1, f"expected one diagnostic, got: {self.error}"
        return self.diagnostics[0].headline()

    @property
    def text(self) -> str:
        """Every message and hint, one per line."""
        return "\n".join(f"{d.headline()}\n  hint: {d.hint}" for d in self.diagnostics)

    def where(self, index: int = 0) -> tuple[str, int, int]:
        """(file name, line, col) of diagnostic ``index``; fails if it has no position."""
        pos = self.diagnostics[index].pos
        assert pos is not None, f"no position for: {self.error}"
        return Path(pos.file).name, pos.line, pos.col

    def hint(self, index: int = 0) -> str:
        """The hint of diagnostic ``index`` ("" if none)."""
        return self.diagnostics[index].hint or ""


@pytest.fixture
def errors_of(write_topo: WriteTopo) -> ErrorsOf:
    """``errors_of(text, *params)``: the TopoError that loading or compiling the text raises."""

    def run(text: str, *params: str) -> Failure:
        path = write_topo(text)
        with pytest.raises(TopoError) as info:
            compile_file(path, params)
        return Failure(info.value)

    return run


@pytest.fixture
def run_topo() -> RunTopo:
    """``run_topo(*argv)``: invoke the ``topo`` typer app in-process."""
    from topo.cli.app import app

    runner = CliRunner()

    def run(*argv: str | Path) -> Result:
        return runner.invoke(app, [str(a) for a in argv])

    return run


def drop_haiku_flax_shim() -> None:
    """Drop dm-haiku's stand-in for ``haiku.experimental.flax`` (installed without flax):
    it sits in ``sys.modules`` as an object whose every attribute access raises
    ImportError, and hypothesis, which reads ``__file__`` of every loaded module, crashes
    on it once a test module has imported haiku (the agents in examples/agents use it)."""
    shim = sys.modules.get("haiku.experimental.flax")
    if shim is not None and not isinstance(shim, types.ModuleType):
        del sys.modules["haiku.experimental.flax"]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems() -> None:
    """Before hypothesis's own hook looks at the modules collection imported."""
    drop_haiku_flax_shim()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """After a test that imported haiku only when it ran (a threads-backend agent)."""
    drop_haiku_flax_shim()


SSH_HOSTS = 3  # the ssh tests' hosts: topo-h1..h3
RAY_HOSTS = 3  # the Ray test cluster's: topo-h4..h6 (the two run side by side)
SLURM_HOSTS = 2  # the Slurm test cluster's nodes: topo-h7, h8 (beside the other two)


@pytest.fixture(scope="session")
def all_test_hosts() -> Iterator[HostSet]:
    """Eight real SSH hosts on this machine (``tests/backends/ssh/testhosts.py``), shared
    by the workers running the ssh tests, the Ray cluster's and the Slurm cluster's:
    reused when up already, else brought up once and taken down by the last to leave
    (skips with the reason where they cannot be made)."""
    reason = testhosts.unavailable()
    if reason:
        pytest.skip(reason)
    with testhosts.shared(SSH_HOSTS + RAY_HOSTS + SLURM_HOSTS) as hosts:
        yield hosts


@pytest.fixture(scope="session")
def test_hosts(all_test_hosts: HostSet) -> HostSet:
    """The ssh tests' three hosts (``topo-h1..h3``)."""
    return all_test_hosts.part(0, SSH_HOSTS)


@pytest.fixture(scope="session")
def ray_test_hosts(all_test_hosts: HostSet) -> HostSet:
    """The Ray test cluster's three hosts (``topo-h4..h6``): never the ssh tests'."""
    return all_test_hosts.part(SSH_HOSTS, RAY_HOSTS)


@pytest.fixture(scope="session")
def slurm_test_hosts(all_test_hosts: HostSet) -> HostSet:
    """The Slurm test cluster's two hosts (``topo-h7``, ``h8``): one slurmd in each."""
    return all_test_hosts.part(SSH_HOSTS + RAY_HOSTS, SLURM_HOSTS)
