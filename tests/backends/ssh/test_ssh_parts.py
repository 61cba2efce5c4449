"""The ssh backend's pieces that need no host: the remote command line, the verdict on
a host's check, the archive --ship sends, and the agent's log streaming."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import topo
from topo.backends.remote.follow import LogFollower
from topo.backends.remote.stream import LogStream, Out
from topo.backends.ssh.hostcheck import MARK, check_script, judge
from topo.backends.ssh.inventory import HostSpec

pytest.importorskip("asyncssh")


def host(**kw: object) -> HostSpec:
    base: dict[str, object] = {
        "name": "h1",
        "address": "10.0.0.1",
        "port": 22,
        "user": "root",
        "key": None,
        "known_hosts": Path("/k"),
        "python": "/opt/py/bin/python3",
        "workdir": "/srv/topo work",
        "env": {"OMP_NUM_THREADS": "1"},
    }
    base.update(kw)
    return HostSpec(**base)  # type: ignore[arg-type]


def test_the_remote_command_carries_its_environment_and_quotes_everything() -> None:
    from topo.backends.ssh.session import remote_command

    line = remote_command(host(), ["/opt/py/bin/python3", "-c", "print('a b')"], {"X": "1 2"})
    assert line.startswith("mkdir -p '/srv/topo work' && cd '/srv/topo work' && exec env ")
    words = shlex.split(line.split(" && ", 2)[2])
    assert words == [
        "exec",
        "env",
        "OMP_NUM_THREADS=1",
        "X=1 2",
        "/opt/py/bin/python3",
        "-c",
        "print('a b')",
    ]


def test_the_check_script_reports_versions_and_missing_modules() -> None:
    done = subprocess.run(
        [sys.executable, "-c", check_script(["json", "no_such_module_4711"])],
        capture_output=True,
        text=True,
        check=True,
    )
    [line] = [x for x in done.stdout.splitlines() if x.startswith(MARK)]
    found = json.loads(line[len(MARK) :])
    assert found["topo"] == topo.__version__
    assert list(found["missing"]) == ["no_such_module_4711"]
    why = judge(host(), 0, done.stdout, "")
    assert why is not None and "target module no_such_module_4711 does not import" in why
    fit = subprocess.run(
        [sys.executable, "-c", check_script(["json"])], capture_output=True, text=True, check=True
    )
    assert judge(host(), 0, fit.stdout, "") is None


def test_the_verdict_names_what_is_wrong_with_a_host() -> None:
    h = host()
    assert "python /opt/py/bin/python3 is not there" in str(
        judge(h, 127, "", "env: '/opt/py/bin/python3': No such file or directory")
    )
    other = {"python": "3.9.2", "topo": "0.0.1", "topo_file": "/x/topo/__init__.py", "missing": {}}
    why = str(judge(h, 0, MARK + json.dumps(other), ""))
    assert (
        "python 3.9.2 there" in why
        and f"topo 0.0.1 there (/x/topo/__init__.py), {topo.__version__} here" in why
    )
    assert "did not finish" in str(judge(h, None, "", "(timed out)"))


def test_ship_packs_sources_and_leaves_out_environments_and_caches(tmp_path: Path) -> None:
    from topo.backends.ssh.ship import pack

    root = tmp_path / "proj"
    for name in [
        "pkg/__init__.py",
        "pkg/mod.py",
        "data/table.csv",
        ".venv/bin/python",
        "pkg/__pycache__/mod.cpython-311.pyc",
        ".git/HEAD",
        "runs/x/status.json",
    ]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    archive, count = pack(root, tmp_path)
    with tarfile.open(archive) as tar:
        names = sorted(n.removeprefix("./") for n in tar.getnames() if tar.getmember(n).isfile())
    assert names == ["data/table.csv", "pkg/__init__.py", "pkg/mod.py"]
    assert count == 3


def test_a_shipped_tree_is_named_by_its_content(tmp_path: Path) -> None:
    """The same files give the same digest (a touched file too: no times are packed), so
    hosts sharing a workdir and later runs find the tree; a changed file gives another."""
    import os

    from topo.backends.ssh.ship import digest_of, pack

    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("A = 1\n")

    def digest() -> str:
        out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
        out.mkdir()
        return digest_of(pack(root, out)[0])

    first = digest()
    os.utime(root / "pkg" / "mod.py", (1, 1))
    assert digest() == first
    (root / "pkg" / "mod.py").write_text("A = 2\n")
    assert digest() != first


def test_the_agent_streams_complete_lines_only(tmp_path: Path) -> None:
    sink = io.BytesIO()
    follower = LogFollower(chunk=4)  # lines longer than a message are split, not stuck
    stream = LogStream(follower.read, Out(sink))
    log = tmp_path / "n.log"
    follower.follow("n", log)
    stream.push()  # the file does not exist yet: nothing, no error
    log.write_text("one\ntw")
    stream.push()
    with log.open("a") as f:
        f.write("o\n")
    stream.push()
    log.open("a").write("three")
    stream.push(final=True)
    sent = [json.loads(x) for x in sink.getvalue().splitlines()]
    assert "".join(m["data"] for m in sent) == "one\ntwo\nthree"
    assert [m["data"] for m in sent][:2] == ["one\n", "two\n"]
    assert {m["label"] for m in sent} == {"n"} and {m["t"] for m in sent} == {"out"}


def test_a_launcher_address_not_of_this_machine_is_refused_before_connecting(
    tmp_path: Path,
) -> None:
    from topo.api import launch
    from topo.diagnostics import TopoError

    for name in ("key", "known"):
        (tmp_path / name).write_text("")
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(
        "defaults: {key: key, known_hosts: known}\n"
        "launcher_address: 192.0.2.1\n"  # TEST-NET-1: nobody's address
        "hosts:\n  a: {address: 192.0.2.11}\n"
    )
    root = Path(__file__).resolve().parents[3]
    with pytest.raises(TopoError, match=r"launcher_address 192\.0\.2\.1 is not an address of this"):
        launch(
            root / "examples/topologies/consumer_producers.yaml",
            "ssh",
            backend_options={"hosts": hosts},
            log_dir=tmp_path / "runs",
        )
    assert not (tmp_path / "runs").exists()
