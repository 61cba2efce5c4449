"""Real SSH hosts on this machine for the ssh backend's tests.

Each host ``topo-hN`` is a network namespace on a private bridge (``topo-br0``,
the launcher side is 10.213.0.1, host N is 10.213.0.(10+N)) running its own
OpenSSH server with its own host key and hostname; it sees this machine's
filesystem except ``<base>/remote``, a directory private to each host. Needs root,
``ip netns``, ``unshare`` and ``sshd`` (Debian: openssh-server, iproute2).

The layout matches ``../shared/testhosts/topo-hosts.sh``, so hosts brought up by
either are reused by the tests, and ``ip link set topo-vN down`` cuts host N off.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from topo.testing import wait_until

BASE = Path(os.environ.get("TOPO_BASE", "/tmp/topo"))
NET = "10.213.0"
BRIDGE = "topo-br0"
SSHD = "/usr/sbin/sshd"


def unavailable() -> str | None:
    """Why test hosts cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "test hosts need root (network namespaces)"
    for tool in ("ip", "unshare", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"test hosts need {tool} (apt-get install iproute2 openssh-client)"
    if not os.path.exists(SSHD):
        return "test hosts need sshd (apt-get install openssh-server)"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"ip netns does not work here: {probe.stderr.strip()}"
    return None


def _run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def _namespaces() -> list[str]:
    out = _run("ip", "netns", "list")
    return sorted(
        (
            w
            for w in (line.split()[0] for line in out.splitlines() if line.strip())
            if w.startswith("topo-h") and w[6:].isdigit()
        ),
        key=lambda n: int(n[6:]),
    )


@dataclass(frozen=True)
class HostSet:
    """Hosts that are up: names and addresses, and the files a client needs."""

    names: tuple[str, ...]
    addresses: tuple[str, ...]
    base: Path = BASE

    @property
    def key(self) -> Path:
        return self.base / "keys" / "client_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.base / "known_hosts"

    @property
    def remote(self) -> Path:
        """Seen by every host as its own private directory."""
        return self.base / "remote"

    def inventory(
        self, path: Path, hosts: dict[str, dict[str, object]] | None = None, **defaults: object
    ) -> Path:
        """Write an inventory of these hosts (``hosts`` adds per-host fields)."""
        extra = hosts or {}
        data = {
            "defaults": {
                "user": "root",
                "key": str(self.key),
                "known_hosts": str(self.known_hosts),
                **defaults,
            },
            "launcher_address": f"{NET}.1",
            "hosts": {
                name: {"address": addr, **extra.get(name, {})}
                for name, addr in zip(self.names, self.addresses, strict=True)
            },
        }
        path.write_text(json.dumps(data, indent=2))  # JSON is YAML
        return path

    def pids(self, name: str) -> list[int]:
        """Every process inside host ``name`` (its sshd included)."""
        return [int(p) for p in _run("ip", "netns", "pids", name).split()]

    def sshd_pids(self, name: str) -> list[int]:
        i = name[6:]
        try:
            return [int((self.base / f"h{i}" / "sshd.pid").read_text().split()[0])]
        except (OSError, ValueError, IndexError):
            return []

    def part(self, first: int, count: int) -> HostSet:
        """``count`` of these hosts from the ``first`` (0-based): a set of their own."""
        end = first + count
        return HostSet(self.names[first:end], self.addresses[first:end], self.base)

    def set_link(self, name: str, up: bool) -> None:
        """Cut host ``name`` off the bridge, or put it back."""
        _run("ip", "link", "set", f"topo-v{name[6:]}", "up" if up else "down")


def _listed() -> HostSet | None:
    """The hosts named in the listing, if there are namespaces and a listing."""
    listing = BASE / "hosts.txt"
    if not _namespaces() or not listing.exists():
        return None
    pairs = [line.split() for line in listing.read_text().splitlines() if line.strip()]
    return HostSet(tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))


def existing() -> HostSet | None:
    """Hosts brought up earlier (by these tests or topo-hosts.sh) whose sshd still runs,
    if any; None for no hosts or a stale set (``down`` clears one)."""
    hosts = _listed()
    if hosts is None or not all(_serving(hosts, name) for name in hosts.names):
        return None
    return hosts


USERS = Path(f"{BASE}-users")  # one file per test process using the hosts, by pid
OURS = "brought-up"  # in USERS: the tests brought the hosts up (and take them down)


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    USERS.mkdir(parents=True, exist_ok=True)
    with open(USERS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _live_users() -> list[int]:
    """The pids of the test processes using the hosts now (a dead one's file is dropped)."""
    live = []
    for entry in USERS.glob("[0-9]*"):
        pid = int(entry.name)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            entry.unlink(missing_ok=True)
            continue
        live.append(pid)
    return live


@contextlib.contextmanager
def shared(n: int) -> Iterator[HostSet]:
    """At least ``n`` hosts for this test process while others (pytest-xdist's workers)
    may use them too: the first brings them up (or reuses a set already up), the last
    to leave takes down what the tests brought up."""
    with _locked():
        hosts = existing()
        if hosts is None or len(hosts.names) < n:
            if _live_users():
                raise RuntimeError(f"the test hosts in use are fewer than {n}")
            down()
            hosts = up(n)
            (USERS / OURS).touch()
        (USERS / str(os.getpid())).touch()
    try:
        yield hosts
    finally:
        with _locked():
            (USERS / str(os.getpid())).unlink(missing_ok=True)
            if not _live_users() and (USERS / OURS).exists():
                down()
                (USERS / OURS).unlink()


def _serving(hosts: HostSet, name: str) -> bool:
    """Whether host ``name``'s sshd still runs inside it (a machine restored from a
    snapshot keeps the namespaces and files of hosts whose processes are gone)."""
    if name not in _namespaces():
        return False
    sshd = hosts.sshd_pids(name)
    return bool(sshd) and sshd[0] in hosts.pids(name)


_SSHD_CONFIG = """\
Port 22
ListenAddress {ip}
HostKey {d}/ssh_host_ed25519_key
PidFile {d}/sshd.pid
AuthorizedKeysFile {base}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 100:30:200
MaxSessions 100
Subsystem sftp /usr/lib/openssh/sftp-server
# Every command runs through root's bash, whose rc file may run `pyenv rehash`: a lock it
# left behind (a shell killed halfway) made each command wait 60 s for it, then go on.
SetEnv PYENV_REHASH_TIMEOUT=2
"""


def up(n: int) -> HostSet:
    """Create ``n`` hosts; refuses if any exist."""
    if _namespaces():
        raise RuntimeError("test hosts are already up")
    (BASE / "keys").mkdir(parents=True, exist_ok=True)
    (BASE / "remote").mkdir(exist_ok=True)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    key = BASE / "keys" / "client_ed25519"
    if not key.exists():
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key), "-C", "topo-tests")
    shutil.copyfile(f"{key}.pub", BASE / "authorized_keys")
    os.chmod(BASE / "authorized_keys", 0o600)
    _run("ip", "link", "add", BRIDGE, "type", "bridge")
    _run("ip", "addr", "add", f"{NET}.1/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    known, listing = [], []
    for i in range(1, n + 1):
        ns, ip, d = f"topo-h{i}", f"{NET}.{10 + i}", BASE / f"h{i}"
        (d / "fs").mkdir(parents=True, exist_ok=True)
        for old in d.glob("ssh_host_ed25519_key*"):
            old.unlink()
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "ssh_host_ed25519_key"))
        (d / "sshd_config").write_text(_SSHD_CONFIG.format(ip=ip, d=d, base=BASE))
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", f"topo-v{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
        _run("ip", "link", "set", f"topo-v{i}", "master", BRIDGE, "up")
        _run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")
        inner = (
            f"hostname {ns} && mount --bind {d}/fs {BASE}/remote && "
            f"exec {SSHD} -D -f {d}/sshd_config -E {d}/sshd.log"
        )
        with open(d / "sshd.out", "ab") as out:
            subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "unshare",
                    "--uts",
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    inner,
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        pub = (d / "ssh_host_ed25519_key.pub").read_text().split()
        known.append(f"{ip} {pub[0]} {pub[1]}\n")
        listing.append(f"{ns} {ip}\n")
    (BASE / "known_hosts").write_text("".join(known))
    (BASE / "hosts.txt").write_text("".join(listing))
    hosts = _listed()
    assert hosts is not None
    for name in hosts.names:
        _wait_listening(name)
    return hosts


def _wait_listening(ns: str) -> None:
    def listening() -> bool:
        out = subprocess.run(
            ["ip", "netns", "exec", ns, "ss", "-Hltn", "sport = :22"],
            capture_output=True,
            text=True,
        ).stdout
        return bool(out.strip())

    try:
        wait_until(listening, 15, every=0.1)
    except AssertionError:
        raise RuntimeError(f"sshd in {ns} did not start (see {BASE}/h{ns[6:]}/sshd.log)") from None


def _emptied(ns: str) -> bool:
    """Whether no process is left inside namespace ``ns``."""
    return not _run("ip", "netns", "pids", ns).split()


def down() -> None:
    """Kill every process inside the hosts (by pid) and remove them."""
    for ns in _namespaces():
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            for pid in [int(p) for p in _run("ip", "netns", "pids", ns).split()]:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            try:
                wait_until(functools.partial(_emptied, ns), wait, every=0.1)
            except AssertionError:
                pass  # on to SIGKILL, then to the host's removal
        subprocess.run(["ip", "link", "del", f"topo-v{ns[6:]}"], capture_output=True)
        _run("ip", "netns", "del", ns)
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)
    for path in [*BASE.glob("h[0-9]*"), BASE / "known_hosts", BASE / "hosts.txt"]:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
