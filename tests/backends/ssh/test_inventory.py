"""The ``--hosts`` inventory: defaults and overrides, paths, and errors at file:line:col."""

from __future__ import annotations

import getpass
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from topo.backends.ssh.inventory import (
    DEFAULT_WORKDIR,
    Inventory,
    load_inventory,
    write_inventory,
)
from topo.diagnostics import TopoError

Write = Callable[[str], Path]


@pytest.fixture
def inventory_file(tmp_path: Path) -> Write:
    """Write an inventory (dedented) next to a known_hosts file and a key."""
    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id_ed25519").write_text("")

    def write(text: str) -> Path:
        path = tmp_path / "hosts.yaml"
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return write


def errors(path: Path) -> list[tuple[int, int, str]]:
    """(line, col, message) of every diagnostic loading ``path`` raises."""
    with pytest.raises(TopoError) as info:
        load_inventory(path)
    out = []
    for d in info.value.diagnostics:
        assert d.pos is not None and d.pos.file == str(path), d
        out.append((d.pos.line, d.pos.col, d.message))
    return out


def test_defaults_apply_and_a_host_overrides_them(inventory_file: Write, tmp_path: Path) -> None:
    path = inventory_file(
        """
        defaults:
          user: root
          port: 2200
          key: keys/id_ed25519
          known_hosts: known_hosts
          python: /opt/py/bin/python
          workdir: /tmp/topo/remote/work
          env: {OMP_NUM_THREADS: 1, A: "x", DEBUG: true}
        launcher_address: 10.213.0.1
        hosts:
          h1:
            address: 10.213.0.11
            labels: [gpu, big]
            capacity: 4
          h2: {address: 10.213.0.12, user: alice, port: 22, env: {A: "y"}, workdir: /w}
        """
    )
    inv = load_inventory(path)
    assert isinstance(inv, Inventory) and inv.names == ("h1", "h2")
    assert inv.launcher_address == "10.213.0.1" and inv.path == path
    h1, h2 = inv.host("h1"), inv.host("h2")
    assert (h1.user, h1.port, h1.workdir, h1.python) == (
        "root",
        2200,
        "/tmp/topo/remote/work",
        "/opt/py/bin/python",
    )
    assert h1.key == tmp_path / "keys" / "id_ed25519"  # relative to the inventory file
    assert h1.known_hosts == tmp_path / "known_hosts"
    assert h1.labels == ("gpu", "big") and h1.capacity == 4
    assert h1.env == {"OMP_NUM_THREADS": "1", "A": "x", "DEBUG": "1"}
    assert (h2.user, h2.port, h2.workdir, h2.labels, h2.capacity) == ("alice", 22, "/w", (), None)
    assert h2.env == {"OMP_NUM_THREADS": "1", "A": "y", "DEBUG": "1"}  # merged, host wins
    assert h1.origin is not None and (h1.origin.line, h1.origin.col) == (11, 3)


def test_what_is_left_out_gets_its_default(inventory_file: Write, tmp_path: Path) -> None:
    path = inventory_file(
        f"hosts:\n  solo: {{address: a.example, known_hosts: {tmp_path}/known_hosts}}\n"
    )
    [host] = load_inventory(path).hosts
    assert (host.port, host.user, host.key) == (22, getpass.getuser(), None)
    assert (host.python, host.workdir, host.env) == (sys.executable, DEFAULT_WORKDIR, {})
    assert load_inventory(path).launcher_address is None


def test_unknown_keys_are_errors_with_a_suggestion(inventory_file: Write) -> None:
    path = inventory_file(
        """
        defaults:
          known_hosts: known_hosts
          pyton: /usr/bin/python3
        hosts:
          h1: {address: 10.0.0.1, lables: [gpu]}
        """
    )
    with pytest.raises(TopoError) as info:
        load_inventory(path)
    found = {(d.pos.line, d.pos.col): d for d in info.value.diagnostics if d.pos}
    assert found[(3, 3)].message == "unknown key 'pyton' in 'defaults'"
    assert found[(3, 3)].hint == "did you mean 'python'?"
    assert found[(5, 27)].message == "unknown key 'lables' in 'hosts.h1'"
    assert found[(5, 27)].hint == "did you mean 'labels'?"


def test_wrong_types_and_missing_fields(inventory_file: Write) -> None:
    path = inventory_file(
        """
        defaults: {known_hosts: known_hosts}
        hosts:
          h1:
            address: 10.0.0.1
            port: "22"
            capacity: 0
          h2: {labels: [gpu]}
        """
    )
    assert sorted(errors(path)) == [
        (5, 11, "'hosts.h1.port' must be an integer, got '22'"),
        (6, 15, "'hosts.h1.capacity' must be ≥ 1, got 0"),
        (7, 3, "'hosts.h2' is missing the required key 'address'"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hosts: {}\n", (1, 8, "'hosts' must not be empty")),
        ("defaults: {}\n", (1, 1, "the top level is missing the required key 'hosts'")),
        ("- h1\n", (1, 1, "an inventory file must be a mapping with at least 'hosts'")),
        ("hosts:\n  h1: {address: [1}\n", None),  # bad YAML: reported where the parser stopped
    ],
)
def test_malformed_files(
    inventory_file: Write, text: str, expected: tuple[int, int, str] | None
) -> None:
    found = errors(inventory_file(text))
    if expected is not None:
        assert found == [expected]
    else:
        assert len(found) == 1 and found[0][0] == 2


def test_missing_file_or_a_directory(tmp_path: Path) -> None:
    with pytest.raises(TopoError) as info:
        load_inventory(tmp_path / "nope.yaml")
    assert str(info.value) == f"error: no such file: {tmp_path / 'nope.yaml'}"
    with pytest.raises(TopoError, match="is a directory, not an inventory file"):
        load_inventory(tmp_path)


def test_files_that_do_not_exist_and_relative_remote_paths(inventory_file: Write) -> None:
    path = inventory_file(
        """
        defaults:
          known_hosts: known_hosts
          workdir: work
        hosts:
          h1:
            address: 10.0.0.1
            key: keys/missing
          h2: {address: 10.0.0.2, known_hosts: /nonexistent/kh, python: bin/python}
        """
    )
    found = errors(path)
    keydir = path.parent / "keys" / "missing"
    assert found == [
        (7, 10, f"key: no such file keys/missing (looked for {keydir})"),
        (3, 12, "workdir must be an absolute path on the host, got 'work'"),  # once, not per host
        (8, 40, "known_hosts: no such file /nonexistent/kh (looked for /nonexistent/kh)"),
        (8, 65, "python must be an absolute path on the host, got 'bin/python'"),
    ]


def test_known_hosts_is_required(inventory_file: Write) -> None:
    path = inventory_file("hosts:\n  h1: {address: 10.0.0.1}\n  h2: {address: 10.0.0.2}\n")
    with pytest.raises(TopoError) as info:
        load_inventory(path)
    [d1, d2] = info.value.diagnostics
    assert d1.message == "host 'h1' has no known_hosts file (host keys are always checked)"
    assert d1.pos is not None and (d1.pos.line, d1.pos.col) == (2, 3)
    assert d2.pos is not None and (d2.pos.line, d2.pos.col) == (3, 3)
    assert d1.hint is not None and "defaults" in d1.hint


def test_duplicate_address_and_port(inventory_file: Write) -> None:
    path = inventory_file(
        """
        defaults: {known_hosts: known_hosts}
        hosts:
          h1: {address: 10.0.0.1}
          h2: {address: 10.0.0.1, port: 2222}
          h3: {address: 10.0.0.1}
        """
    )
    assert errors(path) == [(5, 17, "hosts 'h1' and 'h3' are both 10.0.0.1 port 22")]


def test_host_names_are_checked(inventory_file: Write) -> None:
    path = inventory_file("defaults: {known_hosts: known_hosts}\nhosts:\n  'a b': {address: x}\n")
    [(line, col, message)] = errors(path)
    assert (line, col) == (3, 3) and "host name 'a b' must start with a letter" in message


def test_write_inventory_round_trips(tmp_path: Path) -> None:
    (tmp_path / "kh").write_text("")
    path = write_inventory(
        tmp_path / "hosts.yaml",
        [("h1", "10.213.0.11"), ("h2", "10.213.0.12")],
        launcher_address="10.213.0.1",
        user="root",
        known_hosts=tmp_path / "kh",
        env={"X": "1"},
    )
    inv = load_inventory(path)
    assert [(h.name, h.address, h.user, h.env) for h in inv.hosts] == [
        ("h1", "10.213.0.11", "root", {"X": "1"}),
        ("h2", "10.213.0.12", "root", {"X": "1"}),
    ]
    assert inv.launcher_address == "10.213.0.1"
    with pytest.raises(KeyError, match="hosts: h1, h2"):
        inv.host("h3")
