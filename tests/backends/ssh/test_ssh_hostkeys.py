"""Host keys on the real test hosts: a host ``known_hosts`` has no entry for is said to be
missing from it (with how to add it), apart from a host whose key is not the one listed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends.ssh.testhosts import HostSet

pytest.importorskip("asyncssh")


def test_a_host_missing_from_known_hosts_is_told_apart_from_a_wrong_key(
    test_hosts: HostSet, tmp_path: Path
) -> None:
    from topo.backends.ssh.inventory import load_inventory
    from topo.backends.ssh.session import Sessions

    h1, h2, h3 = test_hosts.addresses[:3]
    lines = test_hosts.known_hosts.read_text().splitlines()
    key_of = {line.split()[0]: line.split(None, 1)[1] for line in lines if line.strip()}
    known = tmp_path / "known_hosts"
    # h1: not listed at all; h2: listed with h3's key; h3: its own key.
    known.write_text(f"{h2} {key_of[h3]}\n{h3} {key_of[h3]}\n")
    inventory = load_inventory(
        test_hosts.inventory(tmp_path / "hosts.yaml", known_hosts=str(known))
    )
    sessions = Sessions()
    try:
        failed = sessions.connect(inventory.hosts[:3])
    finally:
        sessions.close()
    name1, name2, name3 = test_hosts.names[:3]
    assert failed[name1] == (
        f"cannot connect to {h1}:22: known_hosts ({known}) has no entry for {h1}: add the "
        f"host's key (`ssh-keyscan {h1}` prints it; check it against the host before you "
        "trust it)"
    )
    assert failed[name2] == (
        f"cannot connect to {h2}:22: its host key is not the one in known_hosts ({known})"
    )
    assert name3 not in failed
